"""Player sync handles each record on its own: malformed records first, good ones after them synced."""

from __future__ import annotations

import json

from click.testing import CliRunner

from cli.main import cli
from config.set_aside import set_aside_count
from players.sync import add_to_roster, roster, sync_players
from publisher.queues import WAIVER_ACTIONS

POISON = {
    "p-list": ["not", "an", "object"],
    "p-name": {"player_id": "p-name", "full_name": {"first": "Pat"}, "team": "KC"},
    "p-nul": {"player_id": "p-nul", "full_name": "Bad\u0000Name", "team": "KC"},
    "p-espn": {"player_id": "p-espn", "full_name": "Too Big", "espn_id": 2**70},
    "p-espn-infinite": {"player_id": "p-espn-infinite", "full_name": "No End", "espn_id": float("inf")},
    "p-espn-fraction": {"player_id": "p-espn-fraction", "full_name": "A Part", "espn_id": 1.9},
    "p-espn-bool": {"player_id": "p-espn-bool", "full_name": "Yes", "espn_id": True},
    "p-espn-text": {"player_id": "p-espn-text", "full_name": "Wordy", "espn_id": "31394x7"},
    "p-surrogate": {"player_id": "p-surrogate", "full_name": "\ud800", "team": "KC"},
    "4046-again": {"player_id": "4046", "full_name": "Patrick Mahomes (copy)", "team": "KC"},
}


def _map(path, kelce_status: str | None) -> str:
    good = {
        "4046": {"player_id": "4046", "full_name": "Patrick Mahomes", "team": "KC", "espn_id": 3139477},
        "1466": {
            "player_id": "1466",
            "full_name": "Travis Kelce",
            "team": "KC",
            "injury_status": kelce_status,
        },
    }
    # the poisoned records come first (a JSON object keeps its order); the duplicate after its original
    players = (
        {k: v for k, v in POISON.items() if k != "4046-again"} | good | {"4046-again": POISON["4046-again"]}
    )
    path.write_text(json.dumps(players))
    return str(path)


def test_malformed_records_first_are_skipped_with_their_reason_and_the_others_are_synced(
    db, fresh_queues, publisher, read_queue, tmp_path
):
    add_to_roster("L1", ["1466"])
    source = _map(tmp_path / "players.json", None)
    before = {k: set_aside_count("player_sync", k) for k in ("malformed", "duplicate")}

    first = sync_players(source, publisher=publisher)

    assert first.players == 2 and first.rostered == 1
    assert set(first.skipped) == set(POISON)
    assert (
        "not an object" in first.skipped["p-list"] and "full_name must be a string" in first.skipped["p-name"]
    )
    assert "NUL" in first.skipped["p-nul"] and "beyond a bigint" in first.skipped["p-espn"]
    assert "appears twice" in first.skipped["4046-again"]
    assert "not valid UTF-8" in first.skipped["p-surrogate"]
    for key, shown in [
        ("p-espn-infinite", "inf"),
        ("p-espn-fraction", "1.9"),
        ("p-espn-bool", "True"),
        ("p-espn-text", "'31394x7'"),
    ]:
        assert f"espn_id must be an integer or a string of digits, got {shown}" in first.skipped[key], key
    assert set_aside_count("player_sync", "malformed") - before["malformed"] == 9
    assert set_aside_count("player_sync", "duplicate") - before["duplicate"] == 1
    assert [r["full_name"] for r in roster("L1")] == ["Travis Kelce"]

    _map(tmp_path / "players.json", "Out")  # the sync goes on with the next change too
    second = sync_players(source, publisher=publisher)
    assert len(second.alerts) == 1 and len(second.skipped) == len(POISON)
    [(body, _)] = read_queue(WAIVER_ACTIONS)
    assert body["player_id"] == "1466" and body["status"] == "Out"


def test_kickoff_players_sync_reports_the_skipped_records(db, fresh_queues, publisher, test_env, tmp_path):
    source = _map(tmp_path / "players.json", None)
    result = CliRunner().invoke(cli, ["players", "sync", "--source", source, "--json"], env=test_env)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["players"] == 2 and set(answer["skipped"]) == set(POISON)
    text = CliRunner().invoke(cli, ["players", "sync", "--source", source], env=test_env)
    assert f"skipped: {len(POISON)}" in text.stdout and "skipped player p-list: malformed" in text.stderr

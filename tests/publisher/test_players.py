"""Player sync: injury alerts for rostered players from the simulated map; Sleeper ids on ESPN routes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from config.settings import mask_url
from harness.ports import free_port
from models.audit import audit_entries
from players.errors import PlayerSyncError
from players.sync import add_to_roster, load_players_map, roster, sync_players
from publisher.errors import TriggerValidationError
from publisher.queues import WAIVER_ACTIONS
from publisher.triggers import trigger_draft_pick, trigger_waiver
from srsim.server import SimServer
from tests.publisher.helpers import draft, waiver

MAHOMES = {"player_id": "4046", "full_name": "Patrick Mahomes", "team": "KC", "espn_id": "3139477"}
KELCE = {"player_id": "1466", "full_name": "Travis Kelce", "team": "KC", "espn_id": 15847}
BENCH = {"player_id": "6794", "full_name": "Justin Jefferson", "team": "MIN", "espn_id": 4262921}


@pytest.fixture
def players_map(tmp_path):
    """The simulator serving a players map file; ``write`` changes statuses between syncs."""
    path = tmp_path / "players.json"
    server = SimServer([], players_file=path).start_background()

    def write(**statuses: str | None) -> None:
        players = {p["player_id"]: dict(p) for p in (MAHOMES, KELCE, BENCH)}
        for pid, status in statuses.items():
            players[pid.removeprefix("p")]["injury_status"] = status
        path.write_text(json.dumps(players))

    write()
    yield f"{server.base_url}/players/nfl", write, path
    server.stop()


def test_the_first_sync_records_then_a_change_to_out_alerts_once(
    db, fresh_queues, publisher, read_queue, players_map
):
    url, write, _ = players_map
    add_to_roster("L1", ["4046", "1466"])  # Jefferson (6794) is not rostered
    write(p1466="Questionable")
    first = sync_players(url, publisher=publisher)
    assert first.players == 3 and first.rostered == 2 and first.first_seen == 2 and first.alerts == []

    write(p4046="Out", p1466="Questionable", p6794="Doubtful")  # Kelce unchanged, Jefferson unrostered
    second = sync_players(url, publisher=publisher)
    assert len(second.alerts) == 1
    [(body, props)] = read_queue(WAIVER_ACTIONS)
    assert props.message_id == second.alerts[0]
    assert body["event_type"] == "INJURY_STATUS_CHANGE" and body["player_id"] == "4046"
    assert body["player_name"] == "Patrick Mahomes" and body["nfl_team"] == "KC"
    assert body["previous_status"] is None and body["status"] == "Out" and body["observed_at"]

    assert sync_players(url, publisher=publisher).alerts == []  # the same status seen again
    write(p4046="IR", p1466="Questionable")
    assert sync_players(url, publisher=publisher).alerts == []  # IR is not an alert status
    assert read_queue(WAIVER_ACTIONS) == []
    assert {r["sleeper_id"]: r["injury_status"] for r in roster("L1")} == {
        "4046": "IR",
        "1466": "Questionable",
    }


def test_a_numeric_sleeper_id_is_refused_on_the_espn_routes_naming_the_field(
    db, fresh_queues, publisher, pub_settings, players_map
):
    url, _, path = players_map
    sync_players(url, publisher=publisher)
    with pytest.raises(TriggerValidationError, match="add_player_id") as refused:
        trigger_waiver(waiver(add_player_id=4046), publisher=publisher, settings=pub_settings)
    assert refused.value.field == "add_player_id" and "Sleeper" in refused.value.reason
    with pytest.raises(TriggerValidationError, match="espn_id"):
        trigger_draft_pick(draft(espn_id=1466), publisher=publisher, settings=pub_settings)
    # The same player's ESPN id, and an id the map does not know, go through.
    assert trigger_waiver(
        waiver(add_player_id=3139477), publisher=publisher, settings=pub_settings
    ).tracking_id
    assert trigger_waiver(
        waiver(add_player_id=987654321, idempotency_key="other"), publisher=publisher, settings=pub_settings
    ).tracking_id
    # Known as a Sleeper id and also as another player's ESPN id: not "only a Sleeper id", so it passes.
    players = json.loads(path.read_text())
    players["9001"] = {"player_id": "9001", "full_name": "Some Rookie", "team": "KC", "espn_id": 1466}
    path.write_text(json.dumps(players))
    sync_players(url, publisher=publisher)
    assert trigger_draft_pick(draft(espn_id=1466), publisher=publisher, settings=pub_settings).tracking_id


def test_a_map_that_is_not_a_players_map_is_one_clear_error(db, publisher, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2, 3]")
    with pytest.raises(PlayerSyncError, match="JSON object"):
        sync_players(str(bad), publisher=publisher)
    with pytest.raises(PlayerSyncError, match="cannot be read"):
        sync_players(str(tmp_path / "missing.json"), publisher=publisher)


def test_the_cli_keeps_the_roster_and_syncs(db, fresh_queues, publisher, test_env, amqp_vhost, players_map):
    url, write, _ = players_map
    runner = CliRunner()
    env = {**test_env, "AMQP_URL": amqp_vhost}
    added = runner.invoke(
        cli, ["players", "roster", "add", "--league", "L1", "4046", "4046", "1466"], env=env
    )
    assert added.exit_code == 0 and "2 added" in added.output, added.output
    synced = runner.invoke(cli, ["players", "sync", "--source", url, "--json"], env=env)
    assert synced.exit_code == 0, synced.output
    assert json.loads(synced.output)["first_seen"] == 2
    write(p1466="Doubtful")
    again = json.loads(runner.invoke(cli, ["players", "sync", "--source", url, "--json"], env=env).output)
    assert len(again["alerts"]) == 1
    synced_entries = audit_entries(action="players.sync")  # each operator's sync is audited (issue 35)
    assert len(synced_entries) == 2 and synced_entries[0].after == {"source": mask_url(url)}
    listed = json.loads(runner.invoke(cli, ["players", "roster", "list", "--json"], env=env).output)
    assert {p["sleeper_id"]: p["injury_status"] for p in listed["players"]} == {
        "4046": None,
        "1466": "Doubtful",
    }


def test_the_sync_players_catalog_job_runs_one_sync(
    db, fresh_queues, subprocess_env, amqp_vhost, players_map
):
    url, _, _ = players_map
    add_to_roster("L1", ["4046"])
    # the source comes from PLAYERS_SOURCE (settings) only: a run's params cannot name one
    env = {**subprocess_env, "AMQP_URL": amqp_vhost, "PLAYERS_SOURCE": url}

    def sync_players() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "runs.jobs.sync_players"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=str(Path(__file__).resolve().parents[2]),
        )

    done = sync_players()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rostered"] == 1
    env["RUN_PARAMS"] = json.dumps({"source": url})  # ignored
    env["PLAYERS_SOURCE"] = os.devnull
    failed = sync_players()
    assert failed.returncode == 1 and "player sync failed" in failed.stderr


def test_an_unreadable_players_map_url_is_named_with_its_token_masked():
    with pytest.raises(PlayerSyncError) as info:
        load_players_map(f"http://127.0.0.1:{free_port()}/players?token=sekrit", timeout_seconds=5)
    assert "token=***" in str(info.value) and "sekrit" not in str(info.value)

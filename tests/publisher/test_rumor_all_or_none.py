"""rumor-action checks every move before it sends the first: a refused signal saves and sends nothing."""

from __future__ import annotations

import json

import pytest

from models.db import database
from players.rumors import RumorRequest, RumorSignal, evaluate_rumors
from publisher.errors import TriggerValidationError
from tests.publisher.helpers import count

ROSTER = {3139477: "QB", 4362628: "RB", 4430807: "BE"}
BENCH = RumorSignal(player_id=3139477, kind="ruled_out", confidence=0.9)


def _request(*signals: RumorSignal) -> RumorRequest:
    return RumorRequest(league_id="L1", team="7", season=2024, week=5, roster=ROSTER, signals=list(signals))


@pytest.mark.parametrize(
    ("second", "field"),
    [
        pytest.param(
            RumorSignal(player_id=4362628, kind="season_ending", confidence=0.8, replacement_player_id=4046),
            "signals[1].replacement_player_id",
            id="sleeper-id-in-the-players-map",
        ),
        pytest.param(
            RumorSignal(
                player_id=4362628, kind="season_ending", confidence=0.8, replacement_player_id="4046"
            ),
            "signals[1].replacement_player_id",
            id="sleeper-id-string",
        ),
        pytest.param(
            RumorSignal(player_id=4241389, kind="breakout", confidence=0.9, drop_player_id="DAL"),
            "signals[1].drop_player_id",
            id="sleeper-team-id-as-drop",
        ),
        pytest.param(
            RumorSignal(player_id=4362628, kind="season_ending", confidence=0.8, replacement_player_id=2**64),
            "signals[1].replacement_player_id",
            id="id-beyond-bigint",
        ),
    ],
)
def test_a_bad_second_signal_refuses_the_request_before_the_first_move_is_saved(
    publisher, pub_settings, read_queue, second, field
):
    database.execute_sql("INSERT INTO players (sleeper_id, synced_at) VALUES ('4046', now())")
    with pytest.raises(TriggerValidationError) as refused:
        evaluate_rumors(_request(BENCH, second), publisher=publisher, settings=pub_settings)
    assert refused.value.field == field
    assert count("activity_actions") == 0 and count("outbox_messages") == 0
    assert read_queue("lineup_updates") == []


def test_kickoff_trigger_rumor_action_refuses_a_bad_second_signal_and_sends_nothing(run, read_queue):
    from cli.answers import EXIT_INVALID

    database.execute_sql("INSERT INTO players (sleeper_id, synced_at) VALUES ('4046', now())")
    signals = [
        {"player_id": 3139477, "kind": "ruled_out", "confidence": 0.9},
        {"player_id": 4362628, "kind": "season_ending", "confidence": 0.8, "replacement_player_id": 4046},
    ]
    args = ["--league", "L1", "--team", "7", "--season", "2024", "--week", "5"]
    args += [f"--roster={pid}={slot}" for pid, slot in ROSTER.items()]
    args += [f"--signal={json.dumps(s)}" for s in signals] + ["--json"]
    code, output = run("trigger", "rumor-action", *args)
    assert code == EXIT_INVALID, output
    answer = json.loads(output.splitlines()[-1])
    assert answer["status"] == "invalid" and answer["field"] == "signals[1].replacement_player_id"
    assert count("activity_actions") == 0 and read_queue("lineup_updates") == []


def test_a_refusal_met_while_saving_rolls_back_the_moves_saved_before_it(publisher, pub_settings, read_queue):
    from models.activity import ActionStatus
    from publisher.actions import record_result

    season_ending = RumorSignal(
        player_id=4362628, kind="season_ending", confidence=0.8, replacement_player_id=4426515
    )
    [earlier] = evaluate_rumors(_request(season_ending), publisher=publisher, settings=pub_settings)
    record_result(earlier.results[0].tracking_id, ActionStatus.FAILED)  # the IR move failed on ESPN
    read_queue("lineup_updates")
    before = count("activity_actions")
    # the same week again: the IR move is a duplicate of the failed one, which no claim may chain to
    with pytest.raises(TriggerValidationError) as refused:
        evaluate_rumors(_request(BENCH, season_ending), publisher=publisher, settings=pub_settings)
    assert count("activity_actions") == before  # the bench move of signals[0] was rolled back
    assert read_queue("lineup_updates") == []
    assert refused.value.field == "signals[1].after_tracking_id" and "failed" in refused.value.reason


def test_the_moves_of_one_request_are_published_together_after_they_are_saved(
    publisher, pub_settings, read_queue
):
    season_ending = RumorSignal(
        player_id=4362628, kind="season_ending", confidence=0.8, replacement_player_id=4426515
    )
    bench, chained = evaluate_rumors(
        _request(BENCH, season_ending), publisher=publisher, settings=pub_settings
    )
    assert [r.status.value for r in bench.results] == ["queued"] and bench.results[0].published
    ir, claim = chained.results
    assert ir.status.value == "queued" and ir.published and claim.held and not claim.published
    assert sorted(b["swaps"][0]["to_slot"] for b, _ in read_queue("lineup_updates")) == ["BE", "IR"]

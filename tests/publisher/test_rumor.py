"""rumor-action: each documented rule, sent through the lineup and waiver triggers."""

from __future__ import annotations

from models.activity import ActionStatus
from players.rumors import RumorRequest, RumorSignal, evaluate_rumors
from publisher.actions import get_action, record_result
from publisher.drain import drain_outbox
from publisher.triggers import TriggerStatus

ROSTER = {3139477: "QB", 4362628: "RB", 4430807: "BE"}


def _run(publisher, settings, *signals):
    request = RumorRequest(
        league_id="L1", team="7", season=2024, week=5, roster=ROSTER, signals=list(signals)
    )
    return evaluate_rumors(request, publisher=publisher, settings=settings)


def test_a_ruled_out_starter_is_benched(publisher, pub_settings, read_queue):
    [outcome] = _run(
        publisher, pub_settings, RumorSignal(player_id=3139477, kind="ruled_out", confidence=0.9)
    )
    assert outcome.rule == "bench-ruled-out-starter"
    [(body, _)] = read_queue("lineup_updates")
    assert body["swaps"] == [{"player_id": 3139477, "to_slot": "BE"}]


def test_a_season_ending_injury_moves_to_ir_and_claims_the_replacement_behind_it(
    publisher, pub_settings, read_queue
):
    signal = RumorSignal(
        player_id=4362628, kind="season_ending", confidence=0.8, replacement_player_id=4426515
    )
    [outcome] = _run(publisher, pub_settings, signal)
    ir, claim = outcome.results
    assert get_action(claim.tracking_id).after_tracking_id == ir.tracking_id and claim.held
    record_result(ir.tracking_id, ActionStatus.SUCCEEDED)
    drain_outbox(publisher=publisher, settings=pub_settings)
    [(body, _)] = read_queue("waiver_actions")
    assert body["add_player_id"] == 4426515 and body["drop_player_id"] is None


def test_a_breakout_free_agent_is_claimed_dropping_the_named_player(publisher, pub_settings, read_queue):
    signal = RumorSignal(player_id=4241389, kind="breakout", confidence=0.95, drop_player_id=4430807)
    [outcome] = _run(publisher, pub_settings, signal)
    assert outcome.rule == "claim-breakout"
    [(body, _)] = read_queue("waiver_actions")
    assert (body["add_player_id"], body["drop_player_id"]) == (4241389, 4430807)


def test_weak_or_inapplicable_signals_are_ignored_with_a_reason(publisher, pub_settings, read_queue):
    outcomes = _run(
        publisher,
        pub_settings,
        RumorSignal(player_id=3139477, kind="ruled_out", confidence=0.5),
        RumorSignal(player_id=4430807, kind="ruled_out", confidence=0.9),
    )
    assert all(o.ignored and not o.results for o in outcomes)
    assert read_queue("lineup_updates") == []


def test_re_running_the_same_signals_gives_duplicates(publisher, pub_settings):
    signal = RumorSignal(player_id=3139477, kind="ruled_out", confidence=0.9)
    first = _run(publisher, pub_settings, signal)[0].results[0]
    again = _run(publisher, pub_settings, signal)[0].results[0]
    assert again.status is TriggerStatus.DUPLICATE and again.tracking_id == first.tracking_id

"""The spec's idempotency tables: one case per rule row and per queue's key release TTL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.activity import ActionStatus
from models.db import database
from publisher.actions import record_result
from publisher.amqp import AmqpPublisher
from publisher.idempotency import draft_key, effective_key, lineup_key, waiver_key
from publisher.triggers import TriggerStatus, trigger_draft_pick, trigger_lineup, trigger_waiver
from tests.publisher.helpers import count, draft, lineup, waiver
from tests.racing import race

# -- key builders ----------------------------------------------------------------------------


def test_the_lineup_key_is_a_sha256_of_job_team_season_week_and_sorted_swaps():
    a = [{"player_id": 1, "to_slot": "BE"}, {"player_id": 2, "to_slot": "QB"}]
    key = lineup_key(job_name="lineup-123", team="7", season=2024, week=3, swaps=a)
    assert key.startswith("lineup-7-") and len(key.split("-")[-1]) == 64
    assert key == lineup_key(job_name="lineup-123", team="7", season=2024, week=3, swaps=list(reversed(a)))
    assert key != lineup_key(job_name="lineup-124", team="7", season=2024, week=3, swaps=a)


def test_the_lineup_key_without_season_or_week_hashes_job_team_and_swaps_only():
    a = [{"player_id": 1, "to_slot": "BE"}]
    key = lineup_key(job_name="lineup-123", team="7", season=None, week=None, swaps=a)
    assert key.startswith("lineup-7-") and len(key.split("-")[-1]) == 64
    assert key == lineup_key(job_name="lineup-123", team="7", season=2024, week=None, swaps=a)
    assert key != lineup_key(job_name="lineup-124", team="7", season=None, week=None, swaps=a)
    assert key != lineup_key(job_name="lineup-123", team="7", season=2024, week=3, swaps=a)


def test_the_waiver_key_covers_the_chained_ir_player_and_is_none_without_season_or_week():
    plain = waiver_key(team="7", season=2024, week=3, add_player_id=1, drop_player_id=None)
    chained = waiver_key(team="7", season=2024, week=3, add_player_id=1, drop_player_id=None, ir_player_id=9)
    assert plain.startswith("waiver-7-") and plain != chained
    assert waiver_key(team="7", season=None, week=3, add_player_id=1, drop_player_id=2) is None
    assert waiver_key(team="7", season=2024, week=None, add_player_id=1, drop_player_id=2) is None


def test_the_draft_key_is_league_pick_and_espn_id():
    assert draft_key(league_id="L1", pick_number=12, espn_id=4426515) == "L1:12:4426515"


# -- rule table ------------------------------------------------------------------------------


def test_rule_season_and_week_suffix_keeps_last_weeks_key_from_swallowing_this_weeks_action(
    publisher, pub_settings
):
    assert effective_key("k", {"season": 2024, "week": 3}) == "k:s2024w3"
    assert effective_key("k", {"season": 2024}) == "k"
    week3 = trigger_lineup(
        lineup(decision_inputs={"season": 2024, "week": 3}), publisher=publisher, settings=pub_settings
    )
    week4 = trigger_lineup(
        lineup(decision_inputs={"season": 2024, "week": 4}), publisher=publisher, settings=pub_settings
    )
    assert week3.status is week4.status is TriggerStatus.QUEUED
    assert week3.tracking_id != week4.tracking_id


def test_rule_reuse_window_releases_a_finished_key_after_the_ttl(publisher, pub_settings, frozen_clock):
    """The TTL counts from the action's creation (docs/publisher.md), not from its finish: an action
    that finished 20 minutes in releases its lineup key 30 minutes after it was created."""
    first = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    frozen_clock.advance(minutes=20)
    record_result(first.tracking_id, ActionStatus.SUCCEEDED)  # finished late
    frozen_clock.advance(minutes=9)
    duplicate = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    assert duplicate.status is TriggerStatus.DUPLICATE
    frozen_clock.advance(minutes=1)  # 30 min after creation, only 10 after the finish
    again = trigger_lineup(lineup(), publisher=publisher, settings=pub_settings)
    assert again.status is TriggerStatus.QUEUED and again.tracking_id != first.tracking_id


@pytest.mark.parametrize("status", [ActionStatus.QUEUED, ActionStatus.DELIVERED, ActionStatus.RUNNING])
def test_rule_pending_work_keeps_its_key_however_old(publisher, pub_settings, frozen_clock, status):
    first = trigger_waiver(waiver(), publisher=publisher, settings=pub_settings)
    database.execute_sql(
        "UPDATE activity_actions SET status = %s WHERE tracking_id = %s", (status.value, first.tracking_id)
    )
    frozen_clock.advance(days=400)
    again = trigger_waiver(waiver(), publisher=publisher, settings=pub_settings)
    assert again.status is TriggerStatus.DUPLICATE and again.tracking_id == first.tracking_id


def test_rule_no_key_always_publishes(publisher, pub_settings, read_queue):
    request = lineup(idempotency_key=None)
    results = [trigger_lineup(request, publisher=publisher, settings=pub_settings) for _ in range(3)]
    assert {r.status for r in results} == {TriggerStatus.QUEUED}
    assert len({r.tracking_id for r in results}) == 3
    assert len(read_queue("lineup_updates")) == 3


# -- key release TTL per queue ---------------------------------------------------------------


def _lineup(p, s):
    return trigger_lineup(lineup(), publisher=p, settings=s)


def _waiver(p, s):
    return trigger_waiver(waiver(), publisher=p, settings=s)


def _draft(p, s):
    return trigger_draft_pick(draft(), publisher=p, settings=s)


@pytest.mark.parametrize(
    ("trigger", "ttl"),
    [
        pytest.param(_lineup, timedelta(minutes=30), id="lineup_updates-30min"),
        pytest.param(_waiver, timedelta(days=7), id="waiver_actions-7days"),
        pytest.param(_draft, timedelta(minutes=15), id="draft_targets-15min"),
    ],
)
def test_key_release_ttl_per_queue(publisher, pub_settings, frozen_clock, trigger, ttl):
    first = trigger(publisher, pub_settings)
    record_result(first.tracking_id, ActionStatus.FAILED)
    frozen_clock.advance(seconds=ttl.total_seconds() - 1)
    assert trigger(publisher, pub_settings).status is TriggerStatus.DUPLICATE
    frozen_clock.advance(seconds=1)
    assert trigger(publisher, pub_settings).status is TriggerStatus.QUEUED


def test_twenty_concurrent_identical_triggers_give_exactly_one_action(publisher, pub_settings, amqp_vhost):

    def call(go):
        with AmqpPublisher(url=amqp_vhost) as own:
            go()
            return trigger_waiver(waiver(), publisher=own, settings=pub_settings)

    results, errors = race(call, callers=20)
    assert not errors
    assert sorted(r.status.value for r in results) == ["duplicate"] * 19 + ["queued"]
    assert len({r.tracking_id for r in results}) == 1
    assert count("activity_actions") == 1 and count("outbox_messages") == 1

"""Dispatch selection at every edge: the window, each status class, league, open rows, is_test, exhausted.

The window is judged by the app clock (``utcnow``) and row ages by PostgreSQL's; every edge is
tested a minute inside and outside, so neither clock's drift nor the test's own run time
decides an outcome.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from config.clock import utcnow
from lifecycle.dispatch_selection import find_upcoming_matches_needing_listeners
from models.listener_record import MatchListenerRecord
from models.status import DELAYED, LIVE, PREGAME, TERMINAL
from tests.lifecycle.helpers import dispatch

WITHIN = 10  # minutes
MARGIN = 60.0  # seconds inside / outside an edge: more than a loaded box takes between insert and query


@pytest.fixture
def select(lcoordination, db):
    def run(*, within_minutes: int = WITHIN, is_test: bool | None = None) -> set[str]:
        return set(
            find_upcoming_matches_needing_listeners(
                within_minutes=within_minutes,
                is_test=is_test,
                active_max_age_seconds=lcoordination.active_max_age_seconds,
                stale_seconds=lcoordination.stale_seconds,
            )
        )

    return run


def _at(seconds: float):
    return utcnow() + timedelta(seconds=seconds)


def test_both_window_edges_select_inside_and_drop_outside(select, make_match, lcoordination):
    age = lcoordination.active_max_age_seconds
    inside_old = make_match(scheduled=_at(-age + MARGIN))
    outside_old = make_match(scheduled=_at(-age - MARGIN))
    inside_new = make_match(scheduled=_at(WITHIN * 60 - MARGIN))
    outside_new = make_match(scheduled=_at(WITHIN * 60 + MARGIN))
    got = select()
    assert str(inside_old.id) in got and str(inside_new.id) in got
    assert str(outside_old.id) not in got and str(outside_new.id) not in got
    # A zero window (a manual one-shot) keeps the lower edge and ends at now.
    assert select(within_minutes=0) == {str(inside_old.id)}


def test_an_inprogress_match_started_more_than_12_hours_ago_is_still_selected(
    select, make_match, lcoordination
):
    old = _at(-lcoordination.active_max_age_seconds - 3600)
    live = {s: make_match(status=s, scheduled=old) for s in sorted(LIVE)}
    pre = make_match(status="scheduled", scheduled=old)
    got = select()
    assert {str(m.id) for m in live.values()} <= got and str(pre.id) not in got


@pytest.mark.parametrize(
    ("statuses", "in_window", "outside_window"),
    [
        (PREGAME, True, False),
        (LIVE, True, True),
        (DELAYED, True, False),
        (TERMINAL, False, False),
    ],
    ids=["pre-game", "live", "delayed", "terminal"],
)
def test_each_status_class_is_selected_as_the_spec_says(
    select, make_match, lcoordination, statuses, in_window, outside_window
):
    now_ids = {str(make_match(status=s, scheduled=_at(0)).id) for s in sorted(statuses)}
    far = _at(-lcoordination.active_max_age_seconds - 3600)
    far_ids = {str(make_match(status=s, scheduled=far).id) for s in sorted(statuses)}
    got = select()
    assert (now_ids <= got) is in_window and (not now_ids & got) is (not in_window)
    assert (far_ids <= got) is outside_window and (not far_ids & got) is (not outside_window)


def test_a_disabled_league_is_never_selected(select, make_match):
    off = make_match("mlb", league_enabled=False, status="inprogress")
    on = make_match("nfl", status="inprogress")
    assert select() == {str(on.id)}
    assert str(off.id) not in select(is_test=False)


def _open_row(match, *, created_age: float, heartbeat_age: float = 0.0) -> None:
    now = utcnow()
    MatchListenerRecord.create(
        id=str(uuid.uuid4()),
        match=match.id,
        created_at=now - timedelta(seconds=created_age),
        heartbeat_at=now - timedelta(seconds=heartbeat_age),
    )


def test_an_open_row_blocks_only_while_younger_than_12_hours_with_a_fresh_heartbeat(
    select, make_match, lcoordination
):
    age = lcoordination.active_max_age_seconds
    young = make_match(status="inprogress")
    _open_row(young, created_age=age - 60)
    old = make_match(status="inprogress")
    _open_row(old, created_age=age + 60)
    stale = make_match(status="inprogress")
    _open_row(stale, created_age=60, heartbeat_age=lcoordination.stale_seconds + 60)
    closed = make_match(status="inprogress")
    _open_row(closed, created_age=60)
    MatchListenerRecord.update(ended_at=utcnow(), exit_code=13).where(
        MatchListenerRecord.match == closed.id
    ).execute()
    assert select() == {str(old.id), str(stale.id), str(closed.id)}


@pytest.mark.parametrize(
    ("is_test", "expected"),
    [(True, {"test"}), (False, {"live"}), (None, {"test", "live"})],
    ids=["is_test=True", "is_test=False", "is_test=None"],
)
def test_the_is_test_filter_in_all_three_values(select, make_match, is_test, expected):
    ids = {"test": str(make_match(is_test=True).id), "live": str(make_match(is_test=False).id)}
    assert select(is_test=is_test) == {ids[k] for k in expected}


def test_an_exhausted_match_is_selected_but_not_sent(make_match, lsettings, lcoordination, outbox):
    exhausted = make_match(status="inprogress")
    other = make_match(status="inprogress")
    for _ in range(lcoordination.attempt_cap):
        lcoordination.barriers.record_failed_attempt(exhausted.id)
    assert lcoordination.barriers.is_exhausted(exhausted.id)
    result = dispatch(settings=lsettings, coordination=lcoordination, send=outbox, within_minutes=WITHIN)
    assert result.eligible == 2 and result.exhausted == 1 and result.enqueued == 1
    assert outbox.match_ids == [str(other.id)] and not lcoordination.barriers.is_pending(exhausted.id)


def test_auto_dispatch_off_is_not_selected_in_or_out_of_the_window(select, make_match):
    make_match(status="inprogress", auto_dispatch_listener=False)
    make_match(status="scheduled", auto_dispatch_listener=False)
    assert select() == set()


def test_a_tick_stores_for_every_match_the_message_id_it_sends_unique_per_match_and_per_tick(
    make_match, lsettings, lcoordination
):
    from models.start_messages import stored_message_ids

    matches = [make_match() for _ in range(30)]
    ids = [str(m.id) for m in matches]
    ticks = []
    for _ in range(2):
        sent: list = []
        result = dispatch(
            settings=lsettings,
            coordination=lcoordination,
            send=sent.append,
            send_batch=sent.extend,
            within_minutes=WITHIN,
        )
        assert result.enqueued == 30
        assert stored_message_ids(ids) == {m.match_id: m.message_id for m in sent}
        ticks.append({m.message_id for m in sent})
        lcoordination.barriers.clear_pending(*ids)

    assert len(ticks[0]) == len(ticks[1]) == 30 and not ticks[0] & ticks[1]
    for tick in ticks:
        assert len({mid.rsplit(".", 1)[1] for mid in tick}) == 1  # one uuid4 per tick


def test_overlapping_ticks_leave_the_collector_on_only_after_the_last_one():
    import gc

    from lifecycle.dispatch import cycle_collection_paused

    assert gc.isenabled()
    first, second = cycle_collection_paused(), cycle_collection_paused()
    first.__enter__()
    second.__enter__()
    assert not gc.isenabled()
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second tick still runs
    second.__exit__(None, None, None)
    assert gc.isenabled()

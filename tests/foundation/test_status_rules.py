"""Match.status rules: every row of the spec's two example tables, and the whole vocabulary."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from models.status import (
    DELAYED,
    KNOWN,
    LIVE,
    PREGAME,
    TERMINAL,
    Phase,
    apply_stream_status,
    phase_of,
    refreshed_status,
)

NOW = datetime(2024, 5, 21, 18, 0, tzinfo=UTC)
PAST = NOW - timedelta(hours=2)
FUTURE = NOW + timedelta(hours=2)


def either(local: str, incoming: str, expected: str, why: str) -> list[tuple[str, str, bool, bool, str, str]]:
    """A spec row whose questions and start time are "either": one row per combination."""
    return [(local, incoming, qs, past, expected, why) for qs in (False, True) for past in (False, True)]


# (local, incoming, has questions, start past, expected, why)
REFRESH_ROWS = [
    ("scheduled", "scheduled", False, True, "scheduled", "trust SR, nothing to heal (start past)"),
    ("scheduled", "scheduled", False, False, "scheduled", "trust SR, nothing to heal (start ahead)"),
    ("scheduled", "scheduled", True, False, "scheduled", "heal waits until scheduled start"),
    ("scheduled", "scheduled", True, True, "inprogress", "heal the week-later leftover"),
    ("created", "scheduled", True, True, "inprogress", "heal created leftover (SR scheduled)"),
    ("created", "created", True, True, "inprogress", "heal created leftover (SR created)"),
    ("delayed", "scheduled", True, True, "inprogress", "heal delayed leftover (SR scheduled)"),
    ("delayed", "created", True, True, "inprogress", "heal delayed leftover (SR created)"),
    *either("scheduled", "inprogress", "inprogress", "trust SR, no heal needed"),
    *either("scheduled", "closed", "closed", "trust SR, heal never invents closed"),
    *either("inprogress", "scheduled", "inprogress", "freeze: do not rewind a live game"),
    *either("inprogress", "delayed", "delayed", "trust SR delay"),
    *either("closed", "scheduled", "closed", "freeze: do not reopen a finished game"),
    *either("complete", "closed", "closed", "trust SR, both terminal"),
    *either("closed", "complete", "closed", "freeze: never back to an earlier terminal status"),
]


@pytest.mark.parametrize(
    ("local", "incoming", "qs", "start_past", "expected"),
    [r[:5] for r in REFRESH_ROWS],
    ids=[f"{r[5]} [{r[0]}<-{r[1]} qs={r[2]} past={r[3]}]" for r in REFRESH_ROWS],
)
def test_schedule_refresh_persists_the_spec_table_status(local, incoming, qs, start_past, expected):
    scheduled = PAST if start_past else FUTURE
    got = refreshed_status(local, incoming, has_in_game_questions=qs, scheduled=scheduled, now=NOW)
    assert got == expected


STREAM_ROWS = [
    ("scheduled", "inprogress", "inprogress", "first live event on the stream"),
    ("inprogress", "delayed", "delayed", "delay from the feed"),
    ("delayed", "inprogress", "inprogress", "delay ended"),
    ("inprogress", "complete", "complete", "game over on the feed"),
    ("scheduled", "scheduled", "scheduled", "stream must not write pregame"),
    ("closed", "inprogress", "closed", "never reopen terminal"),
    ("complete", "closed", "closed", "a terminal status moves to a later terminal one"),
    ("closed", "complete", "closed", "never back to an earlier terminal one"),
    ("cancelled", "closed", "cancelled", "cancelled is final"),
]


@pytest.mark.parametrize(
    ("local", "incoming", "expected"),
    [r[:3] for r in STREAM_ROWS],
    ids=[r[3] for r in STREAM_ROWS],
)
def test_push_stream_persists_the_spec_table_status(local, incoming, expected):
    assert apply_stream_status(local, incoming) == expected


def test_the_vocabulary_is_split_into_four_disjoint_phases():
    phases = [PREGAME, LIVE, DELAYED, TERMINAL]
    for i, a in enumerate(phases):
        for b in phases[i + 1 :]:
            assert not a & b
    assert {
        "scheduled", "created", "time-tbd", "inprogress", "halftime", "delayed", "wdelay",
        "fdelay", "odelay", "suspended", "complete", "closed", "cancelled", "postponed",
        "unnecessary",
    } == KNOWN  # fmt: skip


@pytest.mark.parametrize("status", sorted(PREGAME))
def test_the_stream_never_writes_a_pregame_status(status):
    assert apply_stream_status("inprogress", status) == "inprogress"


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_a_terminal_game_is_never_reopened_by_the_stream(status):
    for incoming in sorted(LIVE | DELAYED | PREGAME):
        assert apply_stream_status(status, incoming) == status


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_a_terminal_game_is_never_reopened_by_a_schedule_refresh(status):
    for incoming in sorted(LIVE | DELAYED | PREGAME):
        got = refreshed_status(status, incoming, has_in_game_questions=True, scheduled=PAST, now=NOW)
        assert got == status


@pytest.mark.parametrize("live", sorted(LIVE))
@pytest.mark.parametrize("pregame", sorted(PREGAME))
def test_a_live_game_is_never_rewound_to_pregame_by_a_refresh(live, pregame):
    got = refreshed_status(live, pregame, has_in_game_questions=False, scheduled=PAST, now=NOW)
    assert got == live


@pytest.mark.parametrize("local", sorted(PREGAME | DELAYED))
@pytest.mark.parametrize("incoming", sorted(PREGAME))
def test_the_heal_only_ever_produces_inprogress(local, incoming):
    got = refreshed_status(local, incoming, has_in_game_questions=True, scheduled=PAST, now=NOW)
    assert got == "inprogress"


def test_the_heal_does_not_fire_exactly_at_the_scheduled_start():
    got = refreshed_status("scheduled", "scheduled", has_in_game_questions=True, scheduled=NOW, now=NOW)
    assert got == "scheduled"


@pytest.mark.parametrize("status", ["halftime", "wdelay", "suspended", "postponed", "unnecessary"])
def test_the_stream_accepts_live_delayed_and_terminal_statuses(status):
    assert apply_stream_status("inprogress", status) == status


def test_an_unknown_stream_status_is_logged_and_the_local_status_kept(caplog):
    with caplog.at_level(logging.WARNING, logger="models.status"):
        assert apply_stream_status("inprogress", "flooded") == "inprogress"
    assert "flooded" in caplog.text


def test_an_unknown_refresh_status_is_logged_and_the_local_status_kept(caplog):
    with caplog.at_level(logging.WARNING, logger="models.status"):
        got = refreshed_status("scheduled", "bogus", has_in_game_questions=False, scheduled=PAST, now=NOW)
    assert got == "scheduled"
    assert "bogus" in caplog.text


def test_statuses_are_read_case_and_space_insensitively():
    assert apply_stream_status("scheduled", " InProgress ") == "inprogress"
    assert phase_of("CLOSED") is Phase.TERMINAL
    assert phase_of("nonsense") is None


def test_a_naive_scheduled_time_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        refreshed_status(
            "scheduled", "scheduled", has_in_game_questions=True,
            scheduled=datetime(2024, 5, 21, 12, 0), now=NOW,
        )  # fmt: skip

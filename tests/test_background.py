"""The tests' background helpers: FirstSeen times an event when it happens, not when asked."""

from __future__ import annotations

import threading

import pytest

from harness.background import FirstSeen
from tests.waiting import wait_for


def test_first_seen_gives_the_time_the_condition_first_held_not_the_time_it_is_asked(frozen_clock):
    happened = threading.Event()
    with FirstSeen(happened.is_set) as seen:
        happened.set()
        at_the_event = frozen_clock.now
        wait_for(lambda: seen.at is not None, what="the event seen")
        frozen_clock.advance(minutes=5)  # a slow CLI or browser step
        happened.clear()  # later changes do not move it
        assert seen.wait(5, "the event") == at_the_event


def test_first_seen_fails_naming_what_never_happened():
    with FirstSeen(lambda: False) as seen, pytest.raises(AssertionError, match="the lock released"):
        seen.wait(0.2, "the lock released")

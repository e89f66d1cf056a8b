"""A listener worker takes starts only while it may run them: not draining, and its worker lease held."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from actors import draining
from actors.draining import DrainableConsumer, gate_starts_on, taking_starts
from tests.lifecycle.conftest import CountingStarts
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("starts_ungated")


def test_a_worker_without_its_lease_fetches_no_start_until_it_holds_one_again():
    held = [False]
    gate_starts_on(lambda: held[0])
    inner = CountingStarts()
    consumer = DrainableConsumer(inner)  # type: ignore[arg-type]
    assert not taking_starts()
    assert next(consumer) is None and inner.fetches == 0  # left in the queue for the other workers
    held[0] = True
    assert taking_starts() and next(consumer) == "start" and inner.fetches == 1


def test_a_draining_worker_takes_no_start_even_with_its_lease():
    gate_starts_on(lambda: True)
    draining.stop_taking_starts()
    inner = CountingStarts()
    assert next(DrainableConsumer(inner)) is None and inner.fetches == 0  # type: ignore[arg-type]


class _EmptyQueue:
    """An inner consumer whose fetches find nothing (Dramatiq's answers None after its back-off)."""

    def __init__(self) -> None:
        self.fetches = 0

    def __next__(self) -> None:
        self.fetches += 1
        return None


def test_an_idle_consumer_fetches_again_at_once_when_its_own_process_sends_a_start():
    gate_starts_on(lambda: True)
    inner = _EmptyQueue()
    # An idle poll far longer than the test's deadline: only the start sent here can end the wait.
    consumer = DrainableConsumer(inner, idle_seconds=3600)  # type: ignore[arg-type]
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(next, consumer)
        wait_for(lambda: inner.fetches == 1)
        draining.starts_sent()  # a reaper of this process restarted a dead worker's matches
        assert waiting.result(timeout=30) is None
    assert inner.fetches == 1


def test_a_start_sent_while_the_consumer_fetches_is_not_missed():
    gate_starts_on(lambda: True)

    class SentDuringTheFetch(_EmptyQueue):
        def __next__(self) -> None:
            draining.starts_sent()  # sent after the wait's signal was cleared, before the wait
            return super().__next__()

    inner = SentDuringTheFetch()
    consumer = DrainableConsumer(inner, idle_seconds=3600)  # type: ignore[arg-type]
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(next, consumer).result(timeout=30) is None
    assert inner.fetches == 1

"""config.periodic.PeriodicThread: steps, wake, a failing step, stop, restart, on_exit."""

from __future__ import annotations

import logging
import threading

import pytest

from config.periodic import PeriodicThread

LONG = 3600.0  # an interval no test waits out: each step below comes from a wake or wait_first=False


def test_wait_first_false_steps_at_once_then_each_wake_steps_again() -> None:
    steps = threading.Semaphore(0)
    loop = PeriodicThread(steps.release, interval=LONG, name="t-periodic", wait_first=False)
    assert loop.start() and not loop.start()  # idempotent while it runs
    try:
        assert steps.acquire(timeout=10)  # at once, no interval waited
        loop.wake()
        assert steps.acquire(timeout=10)
    finally:
        loop.stop(join_seconds=10)
    assert not loop.alive and loop.stopping


def test_wait_first_waits_the_interval_before_the_first_step() -> None:
    stepped = threading.Event()
    loop = PeriodicThread(stepped.set, interval=LONG, name="t-periodic")
    loop.start()
    try:
        assert not stepped.wait(0.2)  # waiting its hour
        loop.wake()
        assert stepped.wait(10)
    finally:
        loop.stop(join_seconds=10)


def test_the_interval_is_read_before_each_wait() -> None:
    seen = threading.Semaphore(0)
    intervals = iter([LONG, 0.0, 0.0, LONG, LONG])
    loop = PeriodicThread(seen.release, interval=lambda: next(intervals), name="t-periodic")
    loop.start()
    try:
        loop.wake()  # the first hour ends early; then two 0 s intervals step on their own
        assert all(seen.acquire(timeout=10) for _ in range(3))
    finally:
        loop.stop(join_seconds=10)


def test_a_failing_step_is_logged_and_the_next_period_comes(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    done = threading.Event()

    def step() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        done.set()

    loop = PeriodicThread(step, interval=0.0, name="t-periodic", label="the test step")
    with caplog.at_level(logging.ERROR, logger="config.periodic"):
        loop.start()
        try:
            assert done.wait(10)
        finally:
            loop.stop(join_seconds=10)
    assert any(r.getMessage() == "the test step failed" and r.exc_info for r in caplog.records)


def test_stop_ends_the_thread_runs_on_exit_and_a_restart_is_a_new_thread() -> None:
    exits = threading.Semaphore(0)
    steps = threading.Semaphore(0)
    loop = PeriodicThread(
        steps.release, interval=LONG, name="t-periodic", wait_first=False, on_exit=exits.release
    )
    assert not loop.stopping  # before the first start
    loop.start()
    assert steps.acquire(timeout=10)
    loop.stop(join_seconds=10)
    assert exits.acquire(timeout=10) and not loop.alive and not loop.running
    assert loop.start() and loop.running and not loop.stopping
    assert steps.acquire(timeout=10)
    loop.stop(join_seconds=10)
    assert exits.acquire(timeout=10)


def test_stop_from_its_own_step_does_not_join_itself() -> None:
    ended = threading.Event()
    holder: list[PeriodicThread] = []
    loop = PeriodicThread(
        lambda: holder[0].stop(join_seconds=10),
        interval=LONG,
        name="t-periodic",
        wait_first=False,
        on_exit=ended.set,
    )
    holder.append(loop)
    loop.start()
    assert ended.wait(10)


class _StepClock:
    """``config.periodic``'s clock, moved on by the steps: a step "takes" what it adds."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.mark.parametrize("fixed_rate", [True, False])
def test_a_fixed_rate_takes_the_steps_own_time_from_the_wait(
    monkeypatch: pytest.MonkeyPatch, fixed_rate: bool
) -> None:
    import config.periodic

    clock = _StepClock()
    monkeypatch.setattr(config.periodic, "time", clock)
    steps = threading.Semaphore(0)

    def step() -> None:  # each step takes longer than the interval
        clock.now += LONG + 1
        steps.release()

    loop = PeriodicThread(step, interval=LONG, name="t-periodic", wait_first=False, fixed_rate=fixed_rate)
    loop.start()
    try:
        assert steps.acquire(timeout=10)
        if fixed_rate:  # nothing of the interval left: the next step at once, no wake
            assert steps.acquire(timeout=10) and steps.acquire(timeout=10)
        else:  # an interval after the step ended: its hour
            assert not steps.acquire(timeout=0.5)
    finally:
        loop.stop(join_seconds=10)


def test_a_fixed_rate_waits_what_the_step_left_of_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    import config.periodic

    clock = _StepClock()
    monkeypatch.setattr(config.periodic, "time", clock)
    steps = threading.Semaphore(0)

    def step() -> None:  # each step takes all of the interval but 0.05 s
        clock.now += LONG - 0.05
        steps.release()

    loop = PeriodicThread(step, interval=LONG, name="t-periodic", wait_first=False, fixed_rate=True)
    loop.start()
    try:
        assert all(steps.acquire(timeout=10) for _ in range(3))  # 0.05 s waits, not hours
    finally:
        loop.stop(join_seconds=10)

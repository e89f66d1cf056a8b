"""A listener process's processing threads (listener.ingest.ProcessingThreads): every drain runs, a burst
of drains wakes at most the idle threads, a drain that blocks or raises stops no other."""

from __future__ import annotations

import threading

from listener.ingest import ProcessingThreads
from tests.waiting import wait_for


def _idle(threads: ProcessingThreads, count: int) -> None:
    wait_for(lambda: threads._idle == count, timeout=30, what=f"{count} idle processing threads")


def test_every_drain_runs_on_at_most_the_threads_asked_for():
    threads = ProcessingThreads(3)
    ran: list[str] = []
    lock = threading.Lock()

    def drain() -> None:
        with lock:
            ran.append(threading.current_thread().name)

    for _ in range(200):
        threads.submit(drain)
    wait_for(lambda: len(ran) == 200, timeout=30, what="200 drains run")
    assert 1 <= len(set(ran)) <= 3


def test_a_burst_of_drains_wakes_only_the_idle_threads_not_one_per_drain():
    threads = ProcessingThreads(2)
    release = threading.Event()
    for _ in range(2):  # both threads started, then idle
        threads.submit(release.wait)
    release.set()
    _idle(threads, 2)
    notified = 0
    notify = threads._cond.notify

    def counting_notify(n: int = 1) -> None:
        nonlocal notified
        notified += 1
        notify(n)

    threads._cond.notify = counting_notify  # type: ignore[method-assign]
    done = threading.Semaphore(0)
    gate = threading.Event()

    def drain() -> None:
        gate.wait(30)
        done.release()

    for _ in range(50):  # a writer batch's commit: fifty quiet runs' drains at once
        threads.submit(drain)
    gate.set()
    for _ in range(50):
        assert done.acquire(timeout=30)
    assert notified <= 2  # a ThreadPoolExecutor wakes a thread per submit


def test_a_drain_that_blocks_or_raises_stops_no_other():
    threads = ProcessingThreads(2)
    blocked = threading.Event()
    ran = threading.Event()

    def raises() -> None:
        raise RuntimeError("a pipeline bug")

    threads.submit(raises)
    threads.submit(lambda: blocked.wait(60))  # a drain waiting on PostgreSQL
    threads.submit(ran.set)
    assert ran.wait(30)
    blocked.set()


def test_a_drain_that_raises_even_system_exit_leaves_its_thread_running():
    threads = ProcessingThreads(1)  # one thread: the next drain runs only if it survived
    ran = threading.Event()

    def exits() -> None:
        raise SystemExit(3)

    threads.submit(exits)
    threads.submit(ran.set)
    assert ran.wait(30)


def test_drains_submitted_before_a_woken_thread_runs_start_the_threads_not_started_yet():
    threads = ProcessingThreads(2)
    threads.submit(lambda: None)  # one thread started, then idle
    _idle(threads, 1)
    blocked = threading.Event()
    ran = threading.Event()
    with threads._cond:  # both drains arrive before the woken thread can take the first
        threads.submit(lambda: blocked.wait(60))  # a drain waiting on PostgreSQL
        threads.submit(ran.set)
    try:
        # the second thread runs the second drain; without it, the drain waits behind the first
        assert ran.wait(30)
    finally:
        blocked.set()

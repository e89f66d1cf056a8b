"""Real ``dramatiq actors`` workers given a bad value of a setting only a running listener reads.

A worker that consumes ``match_listeners`` reads its MatchListenerEnvironment at boot and stops, naming
the setting; a ``default``-queue worker, like every process that only sends messages, never reads it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.lifecycle.conftest import WorkerProcess
from tests.waiting import wait_for

pytestmark = pytest.mark.e2e

BAD = {"LISTENER_MAX_BAD_LINES": "0"}  # a listener-only setting; it must be > 0


@pytest.fixture
def bad_env(subprocess_env: dict[str, str], lifecycle_env: dict[str, str]) -> dict[str, str]:
    return {**subprocess_env, **lifecycle_env, **BAD}


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """The workers a test started; closed at teardown."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.close()


def test_a_listener_worker_stops_at_start_naming_the_bad_listener_setting(bad_env, workers, tmp_path):
    worker = WorkerProcess(bad_env, tmp_path / "listener.log", queues=("match_listeners",), threads=1)
    workers.append(worker)
    wait_for(lambda: not worker.running(), timeout=60)
    assert worker.proc.returncode != 0
    output = worker.output()
    assert "invalid setting LISTENER_MAX_BAD_LINES: Input should be greater than 0" in output
    assert "ready for action" not in output


def test_a_default_queue_worker_boots_with_the_bad_listener_setting(bad_env, workers, tmp_path):
    worker = WorkerProcess(bad_env, tmp_path / "default.log", queues=("default",), threads=1)
    workers.append(worker)
    worker.wait_ready()
    assert "LISTENER_MAX_BAD_LINES" not in worker.output()

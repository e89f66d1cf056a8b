"""Fixtures of the job-run tests: the catalog, a job_runs queue, publishers and in-process launchers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pika
import pytest

from models.run_log import RunLog
from publisher.amqp import AmqpPublisher
from publisher.queues import JOB_RUNS
from runs.catalog import Catalog, load_catalog
from runs.command import REJECTED_QUEUE
from runs.launcher import Launcher, LauncherConfig
from tests.rabbitmq import vhost_queues
from tests.waiting import wait_for


@pytest.fixture(scope="session")
def catalog(settings) -> Catalog:
    """The catalog kickoff ships (JOB_CATALOG_PATH's default)."""
    return load_catalog(settings.job_catalog_path)


@pytest.fixture
def job_runs_queue(amqp_vhost: str) -> Iterator[str]:
    """A fresh durable job_runs queue in this run's vhost, no job_runs.XQ (both deleted after the test)."""
    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.delete_queue(JOB_RUNS)
        admin.delete_queue(REJECTED_QUEUE)
        admin.declare_durable([JOB_RUNS])
    yield JOB_RUNS
    with AmqpPublisher(url=amqp_vhost) as admin:
        admin.delete_queue(JOB_RUNS)
        admin.delete_queue(REJECTED_QUEUE)


@dataclass(frozen=True)
class SetAside:
    """A job_runs delivery the launcher set aside on job_runs.XQ."""

    body: bytes
    message_id: str | None
    headers: dict[str, Any]


def read_set_aside(vhost_url: str) -> list[SetAside]:
    """Take every message off job_runs.XQ, oldest first (their bodies need not be JSON)."""
    conn = pika.BlockingConnection(pika.URLParameters(vhost_url))
    out: list[SetAside] = []
    try:
        channel = conn.channel()
        while True:
            method, props, body = channel.basic_get(queue=REJECTED_QUEUE, auto_ack=True)
            if method is None:
                return out
            out.append(SetAside(body, props.message_id, dict(props.headers or {})))
    finally:
        conn.close()


@pytest.fixture
def publisher(amqp_vhost: str, job_runs_queue: str) -> Iterator[AmqpPublisher]:
    """A confirming publisher on this run's vhost."""
    with AmqpPublisher(url=amqp_vhost) as pub:
        yield pub


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    """Where this test's job processes write their traces (RUN_TRACE_DIR of its launchers)."""
    path = tmp_path / "traces"
    path.mkdir(exist_ok=True)
    return path


def read_traces(trace_dir: Path) -> list[dict[str, Any]]:
    """Every trace a job process wrote (one per started attempt)."""
    return [json.loads(p.read_text()) for p in sorted(trace_dir.glob("*.json"))]


def queue_counts(vhost_url: str, queue: str = JOB_RUNS) -> tuple[int, int]:
    """(ready, unacknowledged) messages of ``queue``, as RabbitMQ itself reports them."""
    listed = vhost_queues(vhost_url, "messages_ready", "messages_unacknowledged")
    if queue not in listed:
        raise AssertionError(f"queue {queue} not listed: {listed!r}")
    ready, unacked = listed[queue]
    return int(ready), int(unacked)


def run_status(run_id: str) -> RunLog:
    return RunLog.get_by_id(run_id)


def step_until(launcher: Launcher, predicate: Callable[[], bool], *, timeout: float = 30.0) -> None:
    """Turn the launcher's loop until ``predicate()`` holds (fails the test after ``timeout``)."""

    def stepped() -> bool:
        launcher.step()
        return predicate()

    wait_for(stepped, timeout=timeout, interval=0, what="condition")


def kill_running(launcher: Launcher) -> None:
    """Kill every job process a launcher still watches (test teardown)."""
    for entry in list(launcher.running.values()):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(entry.pid, signal.SIGKILL)
        if entry.proc is not None:
            entry.proc.wait(timeout=10)


@pytest.fixture
def make_launcher(
    db: str, settings, catalog: Catalog, amqp_vhost: str, job_runs_queue: str, subprocess_env, tmp_path: Path
) -> Iterator[Callable[..., Launcher]]:
    """Build in-process launchers on this run's vhost and database; closed and cleaned after the test."""
    made: list[tuple[Launcher, AmqpPublisher]] = []

    def make(cap: int = 4, *, job_catalog: Catalog | None = None, **config: Any) -> Launcher:
        config.setdefault("poll_seconds", 0.02)
        config.setdefault("drain_interval_seconds", 0.5)
        config.setdefault("rescan_interval_seconds", 30.0)
        config.setdefault("claim_grace_seconds", 1.0)
        config.setdefault("shutdown_grace_seconds", 5.0)
        pub = AmqpPublisher(url=amqp_vhost)
        (tmp_path / "traces").mkdir(exist_ok=True)
        launcher = Launcher(
            catalog=job_catalog or catalog,
            publisher=pub,
            data_dir=tmp_path / "data",
            amqp_url=amqp_vhost,
            config=LauncherConfig.from_settings(settings, cap=cap, **config),
            job_env={**subprocess_env, "RUN_TRACE_DIR": str(tmp_path / "traces")},
        )
        made.append((launcher, pub))
        return launcher

    yield make
    for launcher, pub in made:
        kill_running(launcher)
        launcher.consumer.close()
        pub.close()


class LauncherThread:
    """A launcher running its real loop (``run``) in a background thread."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="launcher", daemon=True)

    def _run(self) -> None:
        try:
            self.launcher.run(install_signals=False)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def start(self) -> LauncherThread:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.launcher.request_stop()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "launcher thread did not stop"
        if self.error is not None:
            raise self.error


@pytest.fixture
def start_launcher(
    subprocess_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., subprocess.Popen]]:
    """``start_launcher(cap=, env=)``: a `kickoff launcher --cap` subprocess with ``env`` added to
    this run's environment, logging to tmp_path; every one is killed at teardown."""
    procs: list[subprocess.Popen] = []

    def start(*, cap: int, env: dict[str, str]) -> subprocess.Popen:
        log = open(tmp_path / f"launcher-{len(procs)}.log", "wb")  # noqa: SIM115 - closed with the process
        (tmp_path / "traces").mkdir(exist_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "launcher", "--cap", str(cap)],
            env={**subprocess_env, "RUN_TRACE_DIR": str(tmp_path / "traces"), **env},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def roomy_debounce(min_left_seconds: float = 120.0) -> int:
    """A debounce (600..1199 s) whose current window, aligned to the epoch as the code aligns it,
    has at least ``min_left_seconds`` left: two events published now fall in one window."""
    now = time.time()
    return next(n for n in range(600, 1200) if n - now % n > min_left_seconds)


def window_end(dedupe_key: str, seconds: float) -> float:
    """The epoch second at which the window of an event run's dedupe key (job@key@start) ends."""
    start = datetime.strptime(dedupe_key.rsplit("@", 1)[1], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return start.timestamp() + seconds

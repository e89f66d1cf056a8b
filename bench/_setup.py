"""Benchmark scaffolding: a throw-away database and RabbitMQ vhost, removed afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from config.settings import load_settings
from models.db import database, init_database
from models.migrate import drop_database, migrate
from publisher.amqp import AmqpPublisher
from publisher.queues import ALL_QUEUES, OUTBOX_QUEUES

REPO = Path(__file__).resolve().parent.parent
ADMIN_DB = "postgresql://postgres@127.0.0.1:5432"
AMQP_HOST = "amqp://guest:guest@127.0.0.1:5672"


def _ctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@contextmanager
def bench_environment(**overrides: object) -> Iterator[object]:
    """Settings bound to a fresh database and vhost (both dropped when the block ends)."""
    tag = uuid.uuid4().hex[:8]
    db_url = f"{ADMIN_DB}/kickoff_bench_{tag}"
    vhost = f"kickoff_bench_{tag}"
    _ctl("add_vhost", vhost)
    _ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    migrate(db_url)
    init_database(db_url)
    settings = load_settings(
        _env_file=None, database_url=db_url, amqp_url=f"{AMQP_HOST}/{vhost}", **overrides
    )
    with AmqpPublisher(url=settings.amqp_url) as admin:
        admin.declare_durable(list(OUTBOX_QUEUES))
    try:
        yield settings
    finally:
        database.close()
        drop_database(db_url)
        _ctl("delete_vhost", vhost)


class BackendCpu:
    """CPU seconds PostgreSQL spent for one database while the block ran: its backends' user and system
    time from /proc (PostgreSQL on this host), sampled every 0.1 s so a backend that ends between two
    samples loses at most its last 0.1 s. None when /proc cannot be read. A figure of CPU per event
    depends far less on the box's load than events/s does. ``so_far()`` reads it inside the block
    (one connection for a block of many measured parts: no session opened per part)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.seconds: float | None = None
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def __enter__(self) -> BackendCpu:
        import psycopg2

        self._conn = psycopg2.connect(f"{ADMIN_DB}/{self.database}")
        self._conn.autocommit = True
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        try:
            self._sample()
        finally:
            self._conn.close()
        if self._last:
            self.seconds = self._total()

    def so_far(self) -> float:
        """The backends' CPU seconds from the block's start to now (sampled now)."""
        self._sample()
        return self._total()

    def _total(self) -> float:
        with self._lock:
            return sum(self._last[pid] - self._first[pid] for pid in self._last)

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def _sample(self) -> None:
        with self._lock, self._conn.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            pids = [pid for (pid,) in cursor.fetchall()]
            ticks = os.sysconf("SC_CLK_TCK")
            for pid in pids:
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                seconds = (int(fields[11]) + int(fields[12])) / ticks
                self._first.setdefault(pid, seconds)
                self._last[pid] = seconds


#: The last commit before publisher.amqp_link and the public-API batch enqueue: benchmarks load
#: its modules from git, in their own process, to print today's figures beside that baseline.
LEGACY_REF = "bc131f1"


def module_at(ref: str, path: str, name: str, *, replace: dict[str, str] | None = None) -> Any:
    """The module ``path`` as it was at git ``ref``, loaded under ``name`` (source lines in
    ``replace`` swapped first, to point its imports at other loaded baselines)."""
    import types

    source = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{ref}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    for old, new in (replace or {}).items():
        source = source.replace(old, new)
    module = types.ModuleType(name)
    module.__file__ = f"{ref}:{path}"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # our own history, this process only
    return module


def purge(url: str) -> None:
    """Empty every kickoff queue of the vhost."""
    with AmqpPublisher(url=url) as admin:
        for queue in ALL_QUEUES:
            admin.delete_queue(queue)
        admin.declare_durable(list(OUTBOX_QUEUES))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(round(p / 100 * (len(ordered) - 1)), len(ordered) - 1)]


@dataclass(frozen=True)
class Sample:
    """One instant of a measured process: its CPU seconds (user + system), the time, the events so far."""

    cpu_seconds: float
    at: float  # time.monotonic()
    events: int


def sample(process: Any, events: int) -> Sample:
    """Sample ``process`` (a psutil.Process) now, with the ``events`` counted so far."""
    return Sample(sum(process.cpu_times()[:2]), time.monotonic(), events)


def density_figures(*, n: int, baseline_rss: int, rss: int, first: Sample, last: Sample) -> dict[str, float]:
    """Memory, CPU and event-rate figures of ``n`` listeners over the window from ``first`` to ``last``."""
    seconds = last.at - first.at
    return {
        "baseline_mb": baseline_rss / 2**20,
        "rss_mb": rss / 2**20,
        "per_listener_kb": (rss - baseline_rss) / n / 1024,
        "cpu_pct": 100 * (last.cpu_seconds - first.cpu_seconds) / seconds,
        "events_per_s": (last.events - first.events) / seconds,
    }


def free_port() -> int:
    """A free port on 127.0.0.1 chosen the way the tests choose theirs (harness/ports.py: below the
    ephemeral range, so a bench run beside a test run does not take a port one of its servers binds)."""
    from harness.ports import free_port as test_port

    return test_port()


def serve_api(env: dict[str, str], *, workers: int = 1) -> tuple[subprocess.Popen[bytes], str]:
    """Start `kickoff serve` on a free port with ``env`` added to os.environ; wait for /healthz."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "serve", "--port", str(port), "--workers", str(workers)],
        cwd=REPO,
        env={**os.environ, **env},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("kickoff serve did not answer /healthz within 60 s")


def tracing_env(on: bool) -> dict[str, str]:
    """Issue 41's tracing modes: off (OTEL_TRACES_EXPORTER unset), or on with an OTLP exporter whose
    collector is a closed loopback port: every span is made and handed over, then dropped."""
    if not on:
        return {"OTEL_TRACES_EXPORTER": "none"}
    return {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"}

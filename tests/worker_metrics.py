"""A real Dramatiq worker that serves its metrics (DRAMATIQ_PROMETHEUS): its environment, the
worker itself and a scrape of its exposition port."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dramatiq
import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from actors.broker import QUEUE_DEFAULT, build_broker
from cli.processes import ChildProcess, dramatiq_worker_argv
from config.settings import KickoffSettings
from harness.ports import free_port
from tests.project import ROOT


def prometheus_worker_env(
    test_env: dict[str, str], *, port: int, prom_dir: Path, host: str | None = "127.0.0.1"
) -> dict[str, str]:
    """This run's settings plus Dramatiq's Prometheus middleware on ``host``:``port`` (its
    multiprocess files in ``prom_dir``); ``host=None`` leaves ``dramatiq_prom_host`` unset (the default)."""
    env = {k: v for k, v in os.environ.items() if k != "dramatiq_prom_host"}
    env.update(test_env)
    env.update(
        {"DRAMATIQ_PROMETHEUS": "true", "dramatiq_prom_port": str(port), "dramatiq_prom_db": str(prom_dir)}
    )
    if host is not None:
        env["dramatiq_prom_host"] = host
    return env


@dataclass(frozen=True)
class MetricsWorker:
    """A running worker of the default queue and the port it serves its metrics on."""

    process: ChildProcess
    port: int

    def families(self) -> list[Metric] | None:
        """The metric families it serves now (None while its port does not answer); it must still run."""
        assert self.process.running(), self.process.output()
        try:
            text = httpx.get(f"http://127.0.0.1:{self.port}/", timeout=2).text
        except httpx.HTTPError:
            return None
        return list(text_string_to_metric_families(text))


@contextmanager
def metrics_worker(
    test_env: dict[str, str], *, tmp_path: Path, host: str | None = "127.0.0.1"
) -> Iterator[MetricsWorker]:
    """A one-thread worker of the default queue serving its metrics (``prometheus_worker_env``),
    stopped (SIGTERM to its group) after the block."""
    port = free_port()
    env = prometheus_worker_env(test_env, port=port, prom_dir=tmp_path / "prom", host=host)
    worker = ChildProcess(
        dramatiq_worker_argv("default", threads=1), env=env, log=tmp_path / "worker.log", cwd=ROOT
    )
    try:
        yield MetricsWorker(worker, port)
    finally:
        worker.signal_group(signal.SIGTERM)
        worker.proc.wait(timeout=60)
        worker.close()


def enqueue_default(settings: KickoffSettings, actor_name: str, **kwargs: Any) -> None:
    """Enqueue one message for ``actor_name`` on the default queue of this run's broker."""
    message = dramatiq.Message(
        queue_name=QUEUE_DEFAULT, actor_name=actor_name, args=(), kwargs=kwargs, options={}
    )
    build_broker(settings).enqueue(message)

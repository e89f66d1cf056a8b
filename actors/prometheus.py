"""Dramatiq's Prometheus middleware, its exposition server bound to 127.0.0.1 unless configured.

Dramatiq's own fork binds ``dramatiq_prom_host`` and, when that is unset, 0.0.0.0; it is read in
the master process of ``dramatiq actors``, which imports none of kickoff before it forks. So the
middleware here names kickoff's fork instead: it serves the same multiprocess metrics (public
``prometheus_client`` APIs) on ``dramatiq_prom_host`` (default 127.0.0.1) and ``dramatiq_prom_port``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from http.server import HTTPServer
from typing import Any

from dramatiq.middleware import prometheus as dramatiq_prometheus

#: The environment variable Dramatiq's Prometheus middleware reads its bind address from.
HOST_VARIABLE = "dramatiq_prom_host"
#: Where the exposition server binds when HOST_VARIABLE is unset.
DEFAULT_HOST = "127.0.0.1"


def exposition_address() -> tuple[str, int]:
    """(host, port) of the exposition server: dramatiq_prom_host (default 127.0.0.1), dramatiq_prom_port."""
    return os.environ.get(HOST_VARIABLE) or DEFAULT_HOST, dramatiq_prometheus.HTTP_PORT


def serve_metrics() -> None:
    """The fork the master runs: every worker process's Dramatiq metrics, until it is stopped."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = dramatiq_prometheus.DB_PATH
    # prometheus_client picks its multiprocess value class when first imported: after the line above
    from prometheus_client import CollectorRegistry, MetricsHandler, multiprocess  # noqa: PLC0415

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    HTTPServer(exposition_address(), MetricsHandler.factory(registry)).serve_forever()


class LoopbackPrometheus(dramatiq_prometheus.Prometheus):
    """Dramatiq's Prometheus middleware whose exposition fork is ``serve_metrics``."""

    @property
    def forks(self) -> list[Callable[..., Any]]:
        return [serve_metrics]

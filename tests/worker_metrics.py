"""The environment of a real Dramatiq worker that serves its metrics (DRAMATIQ_PROMETHEUS)."""

from __future__ import annotations

import os
from pathlib import Path


def prometheus_worker_env(test_env: dict[str, str], *, port: int, prom_dir: Path) -> dict[str, str]:
    """This run's settings plus Dramatiq's Prometheus middleware on 127.0.0.1:``port`` (its
    multiprocess files in ``prom_dir``)."""
    return {
        **os.environ,
        **test_env,
        "DRAMATIQ_PROMETHEUS": "true",
        "dramatiq_prom_host": "127.0.0.1",
        "dramatiq_prom_port": str(port),
        "dramatiq_prom_db": str(prom_dir),
    }

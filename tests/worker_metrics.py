"""The environment of a real Dramatiq worker that serves its metrics (DRAMATIQ_PROMETHEUS)."""

from __future__ import annotations

import os
from pathlib import Path


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

"""What RabbitMQ itself reports about a test run's vhost (``rabbitmqctl``)."""

from __future__ import annotations

import subprocess


def vhost_queues(vhost_url: str, *columns: str) -> dict[str, list[str]]:
    """``rabbitmqctl list_queues`` of the vhost of ``vhost_url``: queue name -> the asked columns."""
    vhost = vhost_url.rsplit("/", 1)[1]
    out = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "-p", vhost, "--no-table-headers", "name", *columns],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    return {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}

"""A private redis-server for fault tests: its own port and directory, restarted empty on demand.

Never restart the shared Redis: other runs use it. Start one of these instead, point REDIS_URL
(or BROKER_URL) at ``url()``, and ``restart()`` it mid-test: the new server keeps the port and
starts with no data, as a Redis without persistence does after a crash.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

from harness.ports import free_port


class PrivateRedis:
    """One redis-server process on 127.0.0.1:``port`` with nothing on disk."""

    def __init__(self, workdir: Path, *, port: int | None = None) -> None:
        self.port = port or free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self, timeout: float = 20.0) -> PrivateRedis:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH (apt-get install -y redis-server)")
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        args += ["--dir", str(self.workdir), "--logfile", str(self.workdir / "redis.log")]
        self.proc = subprocess.Popen(
            [binary, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"private redis-server on port {self.port} did not start") from None
                time.sleep(0.05)
            finally:
                client.close()

    def stop(self) -> None:
        """Kill the server at once (no save): its data is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self, *, down_seconds: float = 0.5) -> None:
        """Kill it, stay down for ``down_seconds``, and start it again empty on the same port."""
        self.stop()
        time.sleep(down_seconds)
        self.start()

    def __enter__(self) -> PrivateRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

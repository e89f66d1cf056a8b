"""A private pgbouncer in transaction mode, on its own port in front of the shared PostgreSQL.

Never reconfigure the shared PostgreSQL: start one of these and point DATABASE_URL at ``url()``.
pgbouncer refuses to run as root, so the process runs as the ``postgres`` user when this one is
root. The startup parameter ``options`` (kickoff's statement_timeout) is ignored, as a pgbouncer
deployment must: see docs/scaling.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import psycopg2

from harness.ports import free_port

CONFIG = """\
[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {dir}/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 2000
default_pool_size = {pool_size}
ignore_startup_parameters = extra_float_digits,options
logfile = {dir}/pgbouncer.log
pidfile = {dir}/pgbouncer.pid
"""


class PrivatePgbouncer:
    """One pgbouncer process on 127.0.0.1:``port`` (transaction pooling, ``pool_size`` server connections)."""

    def __init__(self, workdir: Path, *, pool_size: int = 5) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.pool_size = pool_size
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 20.0) -> PrivatePgbouncer:
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not Path(binary).exists():
            raise RuntimeError("pgbouncer is not installed (apt-get install -y pgbouncer)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workdir, 0o777)
        (self.workdir / "userlist.txt").write_text('"postgres" ""\n')
        ini = self.workdir / "pgbouncer.ini"
        ini.write_text(CONFIG.format(port=self.port, dir=self.workdir, pool_size=self.pool_size))
        as_user = ["-u", "postgres"] if os.geteuid() == 0 else []
        self.proc = subprocess.Popen(
            [binary, *as_user, str(ini)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg2.connect(self.url("postgres"), connect_timeout=1).close()
                return self
            except psycopg2.OperationalError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    log = self.workdir / "pgbouncer.log"
                    detail = log.read_text()[-2000:] if log.exists() else ""
                    raise RuntimeError(f"pgbouncer on port {self.port} did not start: {detail}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> PrivatePgbouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

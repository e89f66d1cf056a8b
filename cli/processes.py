"""Child processes of the demo, the benchmarks and the end-to-end tests: each in its own session
(process group) with its output in a log file, stopped as a group so no grandchild outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path


def dramatiq_worker_argv(
    *queues: str,
    processes: int | None = 1,
    threads: int | None = None,
    shutdown_timeout_ms: int | None = None,
) -> list[str]:
    """The command line of a ``dramatiq actors`` worker of this environment on ``queues``
    (``None``: dramatiq's own default for processes or threads)."""
    argv = [str(Path(sys.executable).with_name("dramatiq")), "actors"]
    if processes is not None:
        argv += ["--processes", str(processes)]
    if threads is not None:
        argv += ["--threads", str(threads)]
    if shutdown_timeout_ms is not None:
        argv += ["--worker-shutdown-timeout", str(shutdown_timeout_ms)]
    return [*argv, "--queues", *queues]


class ChildProcess:
    """One started child: ``proc`` is its Popen, ``log`` the file its stdout and stderr go to."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        log: Path,
        cwd: str | Path | None = None,
        append: bool = False,
    ) -> None:
        self.log = log
        self._fh = log.open("ab" if append else "wb")
        self.proc = subprocess.Popen(
            argv, env=dict(env), cwd=cwd, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_output(self, text: str, *, timeout: float) -> bool:
        """Wait until ``text`` is in the log: False when the child exits or ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if not self.running() or time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group, if it still runs."""
        if self.running():
            os.killpg(self.proc.pid, sig)

    def kill(self, *, timeout: float = 10.0) -> None:
        """SIGKILL the whole group (no shutdown code runs) and reap the child."""
        self.signal_group(signal.SIGKILL)
        self.proc.wait(timeout=timeout)

    def terminate(self, *, timeout: float) -> int:
        """SIGTERM to the child alone (a dramatiq master forwards it to its workers) and wait.

        Raises subprocess.TimeoutExpired when it is still running after ``timeout`` seconds.
        """
        if self.running():
            os.kill(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        """Kill the child if it still runs; close its log."""
        try:
            if self.running():
                self.kill()
        finally:
            self._fh.close()


def stop_all(children: Iterable[ChildProcess], *, grace: float) -> None:
    """SIGTERM every child's group, give them ``grace`` seconds in all, SIGKILL the rest; close logs."""
    children = list(children)
    for child in children:
        child.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill(timeout=5)
        child.close()

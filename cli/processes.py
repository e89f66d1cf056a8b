"""Child processes of ``kickoff up``, the demo, the benchmarks and the end-to-end tests: each in its
own session (process group) with its output in a log file, stopped as a group so no grandchild
outlives it; ``ProcessGroup`` supervises named children for ``up`` and ``demo``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
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

    def reap_group(self) -> None:
        """SIGKILL whatever is left in the child's process group once the child itself ended."""
        if self.running():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def last_lines(self, count: int) -> list[str]:
        """The last ``count`` lines of the child's log."""
        return self.output().splitlines()[-count:]

    def close(self) -> None:
        """Kill the child if it still runs; close its log."""
        try:
            if self.running():
                self.kill()
        finally:
            self._fh.close()


class ProcessGroup:
    """Named children logging to ``log_dir/{name}.log``; stopped in reverse start order."""

    def __init__(self, env: Mapping[str, str], log_dir: Path) -> None:
        self.env = dict(env)
        self.log_dir = log_dir
        self.children: dict[str, ChildProcess] = {}
        self._read: dict[str, int] = {}
        self._partial: dict[str, str] = {}

    def start(self, name: str, argv: list[str]) -> ChildProcess:
        """Start ``argv`` as child ``name`` (its log is appended to, so a restart keeps the old lines)."""
        child = ChildProcess(argv, env=self.env, log=self.log_dir / f"{name}.log", append=True)
        self.children[name] = child
        return child

    def kill9(self, name: str) -> None:
        """SIGKILL child ``name`` and forget it (the demo's kill drill)."""
        child = self.children.pop(name)
        child.kill()
        child.close()

    def exited(self) -> list[tuple[str, int]]:
        """(name, exit code) of every child that has ended."""
        return [(name, c.proc.returncode) for name, c in self.children.items() if not c.running()]

    def new_lines(self) -> Iterator[tuple[str, str]]:
        """(name, line) of every complete line the children logged since the last call."""
        for name, child in self.children.items():
            with child.log.open("rb") as fh:
                fh.seek(self._read.get(name, 0))
                chunk = fh.read()
            if not chunk:
                continue
            self._read[name] = self._read.get(name, 0) + len(chunk)
            text = self._partial.pop(name, "") + chunk.decode(errors="replace")
            *lines, rest = text.split("\n")
            if rest:
                self._partial[name] = rest
            for line in lines:
                yield name, line

    def stop(self, *, grace: float, hurry: threading.Event | None = None) -> list[str]:
        """Stop every child, the last started first: SIGTERM to the child alone (a dramatiq master
        forwards it to its workers), up to ``grace`` seconds each (no more once ``hurry`` is set),
        then SIGKILL to its whole group; whatever is left in a group is killed. Returns the names
        that needed SIGKILL."""
        killed = []
        for name, child in reversed(list(self.children.items())):
            if child.running():
                os.kill(child.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while child.running() and time.monotonic() < deadline and not (hurry and hurry.is_set()):
                time.sleep(0.05)
            if child.running():
                killed.append(name)
                child.kill(timeout=5)
            child.reap_group()
            child.close()
        return killed

"""Job processes: start one under a small sh wrapper that records its exit code, and find it again."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from models.run_log import RunLog
from runs.catalog import Job

logger = logging.getLogger(__name__)

#: The job process's trace context (the W3C traceparent of the launcher's span of the run).
TRACEPARENT_ENV = "TRACEPARENT"

# Runs the job, then writes its exit code to the file named by $1, so a launcher that died
# meanwhile (and so cannot wait() for it) still learns how the run ended.
EXIT_WRAPPER = 'f="$1"; shift; "$@"; c=$?; echo "$c" > "$f.tmp" && mv "$f.tmp" "$f"; exit "$c"'


@dataclass(frozen=True)
class RunFiles:
    """Where one attempt of one run writes its output and its exit code."""

    log: Path
    exit: Path


def run_files(data_dir: Path, run: RunLog) -> RunFiles:
    """``{data_dir}/runs/<job>/<run_id>.<attempt>.log`` and ``.exit`` of the run's current attempt."""
    base = Path(data_dir) / "runs" / run.job
    stem = f"{run.id}.{run.attempt}"
    return RunFiles(log=base / f"{stem}.log", exit=base / f"{stem}.exit")


def run_environment(
    run: RunLog, *, base: dict[str, str] | None = None, traceparent: str | None = None
) -> dict[str, str]:
    """The environment of a job process: ours plus RUN_ID, RUN_TRIGGER, RUN_PARENT_ID, JOB_NAME... and
    TRACEPARENT (the launcher's span of the run, the job's spans' parent) when there is one."""
    env = dict(os.environ if base is None else base)
    env.pop(TRACEPARENT_ENV, None)
    if traceparent:
        env[TRACEPARENT_ENV] = traceparent
    env.update(
        {
            "RUN_ID": str(run.id),
            "RUN_TRIGGER": run.trigger,
            "RUN_PARENT_ID": "" if run.parent_id is None else str(run.parent_id),
            "RUN_ATTEMPT": str(run.attempt),
            "RUN_PARAMS": json.dumps(run.params or {}, separators=(",", ":")),
            "JOB_NAME": run.job_name,
        }
    )
    return env


def spawn(
    run: RunLog,
    job: Job,
    *,
    files: RunFiles,
    base_env: dict[str, str] | None = None,
    traceparent: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start the job's command for the run's current attempt, output appended to its log file.

    The process gets its own session, so a signal to the launcher does not reach it.
    """
    files.log.parent.mkdir(parents=True, exist_ok=True)
    files.exit.unlink(missing_ok=True)
    with open(files.log, "ab") as log:
        return subprocess.Popen(
            ["/bin/sh", "-c", EXIT_WRAPPER, "kickoff-run", str(files.exit), *job.argv()],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=run_environment(run, base=base_env, traceparent=traceparent),
            start_new_session=True,
            close_fds=True,
        )


def read_exit_code(path: Path) -> int | None:
    """The exit code the wrapper wrote, or None when it never wrote one (the process was lost)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def process_alive(pid: int, run_id: str) -> bool:
    """True while process ``pid`` runs and is the job process of ``run_id`` (not a reused pid)."""
    proc = Path("/proc") / str(pid)
    try:
        stat = (proc / "stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
    if state in ("Z", "X"):
        return False
    try:
        environ = (proc / "environ").read_bytes()
    except PermissionError:
        return True  # cannot look inside; the pid exists
    except OSError:
        return False
    return f"RUN_ID={run_id}".encode() in environ.split(b"\0")


def find_run_process(run_id: str, attempt: int) -> int | None:
    """The pid of the exit-code wrapper (or job) of ``run_id`` at ``attempt``, found in /proc."""
    wanted = {f"RUN_ID={run_id}".encode(), f"RUN_ATTEMPT={attempt}".encode()}
    found: dict[int, int] = {}  # pid -> parent pid
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = set((entry / "environ").read_bytes().split(b"\0"))
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if wanted <= environ:
            found[int(entry.name)] = int(stat.rsplit(")", 1)[-1].split()[1])
    # The wrapper is the one whose parent is not itself part of the run.
    roots = [pid for pid, ppid in found.items() if ppid not in found]
    return min(roots) if roots else None

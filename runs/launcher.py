"""The launcher: consumes job_runs, keeps a pending list, starts runs as processes under a cap."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from config import spans
from config.clock import utcnow
from config.errors import BrokerUnavailable, DatabaseUnavailable, KickoffError
from config.set_aside import set_aside
from config.settings import KickoffSettings
from models.db import database_errors
from models.run_log import RunLog
from publisher.amqp import OutgoingMessage
from runs.catalog import Catalog, Job
from runs.command import ERROR, REJECTED_QUEUE, RunCommand
from runs.consumer import Delivery, RunConsumer
from runs.errors import InvalidRunCommand
from runs.process import find_run_process, process_alive, read_exit_code, run_files, spawn
from runs.publish import CommandPublisher, drain_job_runs, send_outbox_rows
from runs.state import (
    LOST,
    claim,
    finish,
    is_pending,
    mark_started,
    queued_runs,
    requeue_unstarted,
    running_on_host,
)

logger = logging.getLogger(__name__)

#: The loop's name where it sets a delivery aside (config.set_aside).
LOOP = "launcher"

DB_RETRY_SECONDS = 2.0  # pause after PostgreSQL failed before touching it (and the broker) again
TERM_GRACE_SECONDS = 5.0  # after its time limit an attempt gets SIGTERM, then SIGKILL this much later


def time_limit_reason(seconds: float) -> str:
    """run_log.reason of an attempt the launcher ended at its job's time limit."""
    return f"time limit {seconds:g} s passed"


@dataclass
class Running:
    """One attempt this launcher watches: its own child (``proc``) or an adopted orphan (``pid``)."""

    run_id: str
    attempt: int
    pid: int
    exit_file: Path
    proc: subprocess.Popen[bytes] | None = None
    span: Any = None  # the launcher's span of this attempt (config.spans; None: untraced or adopted)
    deadline: float = float("inf")  # epoch second of its job's time limit
    limit_seconds: float = 0.0
    timed_out: bool = False  # SIGTERM sent at the deadline (SIGKILL after TERM_GRACE_SECONDS)


@dataclass
class LauncherStats:
    """Counters of one launcher process (logged on exit, read by tests and the benchmark)."""

    accepted: int = 0  # deliveries added to the pending list
    stale: int = 0  # deliveries of runs no longer queued at that attempt (acked and dropped)
    rejected: int = 0  # deliveries that were not a startable RunCommand (set aside on job_runs.XQ)
    started: int = 0
    finished: int = 0
    skipped: int = 0
    adopted: int = 0  # orphans of an earlier launcher watched after a restart
    max_running: int = 0
    ack_seconds: list[float] = field(default_factory=list)  # delivery received -> acked


@dataclass(frozen=True)
class LauncherConfig:
    """The launcher's knobs: the LAUNCHER_* settings (tests pass short intervals)."""

    cap: int
    prefetch: int
    poll_seconds: float
    drain_interval_seconds: float
    rescan_interval_seconds: float
    claim_grace_seconds: float
    shutdown_grace_seconds: float
    drain_batch: int

    @classmethod
    def from_settings(cls, settings: KickoffSettings, **overrides: Any) -> LauncherConfig:
        """Each knob from LAUNCHER_<KNOB> (drain_batch from JOB_RUN_DRAIN_BATCH); ``overrides`` win."""
        knobs = {
            f.name: getattr(settings, f"launcher_{f.name}") for f in fields(cls) if f.name != "drain_batch"
        }
        return cls(**{**knobs, "drain_batch": settings.job_run_drain_batch, **overrides})


class Launcher:
    """Starts job runs as subprocesses, at most ``config.cap`` at once on this host.

    A delivery is acked as soon as the run is checked (queued at the command's attempt) and in
    the pending list, so no delivery is held while a run waits for a slot or runs. After a
    restart the list is rebuilt from queued run_log rows and orphans are watched or finished.
    """

    def __init__(
        self,
        *,
        catalog: Catalog,
        publisher: CommandPublisher,
        data_dir: Path,
        amqp_url: str,
        config: LauncherConfig,
        host: str | None = None,
        job_env: Mapping[str, str] | None = None,
    ) -> None:
        self.catalog = catalog
        self.publisher = publisher
        self.data_dir = Path(data_dir)
        self.config = config
        self.host = host or socket.gethostname()
        self.job_env = None if job_env is None else dict(job_env)  # None: this process's environment
        self.pending: OrderedDict[str, int] = OrderedDict()  # run id -> attempt, oldest first
        self.trace_parents: dict[str, str] = {}  # run id -> its delivery's traceparent (its publish span)
        self.running: dict[str, Running] = {}
        self.stats = LauncherStats()
        self.consumer = RunConsumer(url=amqp_url, on_delivery=self.on_delivery, prefetch=config.prefetch)
        self._stop = False
        self._next_drain = 0.0
        self._next_rescan = 0.0
        self._next_connect = 0.0
        self._db_down_until = 0.0

    # -- deliveries -------------------------------------------------------------------

    def on_delivery(self, delivery: Delivery) -> None:
        """Check the command whole and its run queued at the command's attempt, list it, then ack.

        A delivery that cannot be handled (not JSON, a field of the wrong type or not a UUID,
        a job not in the catalog, an unexpected error) is set aside on job_runs.XQ with its
        reason; the launcher goes on with the next one.
        """
        received = time.monotonic()
        try:
            command = RunCommand.from_bytes(delivery.body)
            command.check_job(self.catalog)
        except InvalidRunCommand as exc:
            self._set_aside(delivery, str(exc), kind=exc.refusal)
            return
        if time.monotonic() < self._db_down_until:
            delivery.nack()
            return
        try:
            pending = is_pending(command.run_id, command.attempt)
        except DatabaseUnavailable as exc:
            logger.warning("run %s: cannot check run_log, requeueing the command: %s", command.run_id, exc)
            delivery.nack()
            self._db_down_until = time.monotonic() + DB_RETRY_SECONDS
            self._next_connect = self._db_down_until  # stop reading the broker meanwhile
            return
        except Exception as exc:  # one bad delivery never stops the launcher (invariant 9)
            logger.exception("run %s: cannot handle its command", command.run_id)
            self._set_aside(delivery, f"{type(exc).__name__}: {exc}", kind=ERROR)
            return
        if pending:
            self.pending.setdefault(command.run_id, command.attempt)
            parent = delivery.headers.get(spans.TRACEPARENT)
            if isinstance(parent, str) and spans.context_of(parent) is not None:
                self.trace_parents[command.run_id] = parent
        else:
            logger.debug("run %s attempt %s: not queued any more, dropped", command.run_id, command.attempt)
        delivery.ack()
        self.stats.ack_seconds.append(time.monotonic() - received)
        if pending:
            self.stats.accepted += 1
        else:
            self.stats.stale += 1

    def _set_aside(self, delivery: Delivery, reason: str, *, kind: str) -> None:
        """Copy the delivery to job_runs.XQ with its reason (confirmed), then ack it; count and log
        it (config.set_aside: loop ``launcher``).

        If the copy is not confirmed the delivery is requeued and the consumer pauses, so a
        rejected command is never lost and never spins.
        """
        copy = OutgoingMessage(
            queue=REJECTED_QUEUE,
            body={},
            raw=delivery.body,
            message_id=delivery.message_id or f"rejected-{uuid.uuid4()}",
            headers={
                "x-kickoff-reason": reason[:1000],
                "x-kickoff-kind": kind,
                "x-kickoff-rejected-at": utcnow().isoformat(),
                "x-kickoff-host": self.host,
            },
        )
        [outcome] = self.publisher.publish_many([copy])
        if not outcome.confirmed:
            logger.warning(
                "job_runs delivery %s: cannot set it aside on %s (%s), requeued: %s",
                delivery.message_id,
                REJECTED_QUEUE,
                outcome.error,
                reason,
            )
            delivery.nack()
            self._next_connect = time.monotonic() + DB_RETRY_SECONDS
            return
        delivery.ack()
        self.stats.rejected += 1
        set_aside(
            LOOP, f"job_runs delivery {delivery.message_id} (copied to {REJECTED_QUEUE})", reason, kind=kind
        )

    # -- starting ---------------------------------------------------------------------

    def start_pending(self) -> None:
        """Claim and start pending runs while fewer than ``cap`` run."""
        while self.pending and len(self.running) < self.config.cap:
            run_id, attempt = self.pending.popitem(last=False)
            try:
                outcome = claim(run_id, attempt, catalog=self.catalog, host=self.host)
            except BaseException:  # PostgreSQL away: keep the run first in line for the next turn
                self.pending[run_id] = attempt
                self.pending.move_to_end(run_id, last=False)
                raise
            if outcome.skipped is not None:
                self.stats.skipped += 1
            parent = self.trace_parents.pop(run_id, None)
            if outcome.run is None or outcome.job is None:
                continue
            self._start(outcome.run, outcome.job, parent=parent)

    def _start(self, run: RunLog, job: Job, *, parent: str | None = None) -> None:
        """Start the run's job process in a ``<job> run`` span: a child of its delivery's publish span
        (``parent``), else of the context the run was published in; TRACEPARENT names the span."""
        files = run_files(self.data_dir, run)
        span = spans.start_span(
            f"{run.job} run",
            parent=parent or run.traceparent,
            attributes={"kickoff.run_id": run.id, "kickoff.job": run.job, "kickoff.attempt": run.attempt},
        )
        try:
            proc = spawn(
                run,
                job,
                files=files,
                base_env=self.job_env,
                traceparent=spans.traceparent_of(span) if span is not None else None,
            )
        except OSError as exc:
            logger.error("run %s of %s: cannot start %s: %s", run.id, run.job, job.argv(), exc)
            spans.end_span(span, error=exc)
            self._finished(str(run.id), run.attempt, exit_code=None, reason=f"cannot start: {exc}")
            return
        self.running[str(run.id)] = Running(
            str(run.id),
            run.attempt,
            proc.pid,
            files.exit,
            proc,
            span,
            deadline=time.time() + job.time_limit_seconds,
            limit_seconds=job.time_limit_seconds,
        )
        mark_started(run, pid=proc.pid, log_path=str(files.log))
        self.stats.started += 1
        self.stats.max_running = max(self.stats.max_running, len(self.running))
        logger.info("run %s of %s started: attempt %s, pid %s", run.id, run.job, run.attempt, proc.pid)

    # -- finishing --------------------------------------------------------------------

    def _enforce_time_limit(self, entry: Running, now: float) -> None:
        """Past its job's time limit: SIGTERM to the attempt's process group, SIGKILL after the grace."""
        if now < entry.deadline or entry.pid <= 0:
            return
        if entry.timed_out and now < entry.deadline + TERM_GRACE_SECONDS:
            return
        sig = signal.SIGKILL if entry.timed_out else signal.SIGTERM
        if not entry.timed_out:
            logger.warning(
                "run %s attempt %s: past its time limit (%g s), ending it",
                entry.run_id,
                entry.attempt,
                entry.limit_seconds,
            )
        entry.timed_out = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(entry.pid, sig)

    def reap(self) -> None:
        """End every watched attempt past its time limit; finish every one whose process has ended."""
        now = time.time()
        for entry in list(self.running.values()):
            self._enforce_time_limit(entry, now)
            if entry.proc is not None:
                code = entry.proc.poll()
                if code is None:
                    continue
                exit_code: int | None = code if code >= 0 else 128 - code
                reason = None
            else:
                if process_alive(entry.pid, entry.run_id):
                    continue
                exit_code = read_exit_code(entry.exit_file)
                reason = LOST if exit_code is None else None
            if entry.timed_out:
                reason = time_limit_reason(entry.limit_seconds)
            # Forget the entry only once the outcome is recorded (a database error retries).
            self._finished(entry.run_id, entry.attempt, exit_code=exit_code, reason=reason)
            del self.running[entry.run_id]
            failed = reason or (None if exit_code == 0 else f"exit {exit_code}")
            spans.end_span(entry.span, error=failed, **{"kickoff.exit_code": exit_code})

    def _finished(self, run_id: str, attempt: int, *, exit_code: int | None, reason: str | None) -> None:
        result = finish(run_id, attempt, exit_code=exit_code, catalog=self.catalog, reason=reason)
        if result.status is None:
            return
        self.stats.finished += 1
        if result.retry_attempt is not None:
            self.pending.setdefault(run_id, result.retry_attempt)
        for successor in result.successors:  # also published; whichever comes first starts it
            self.pending.setdefault(successor, 1)
        if result.outbox_ids:
            send_outbox_rows(result.outbox_ids, publisher=self.publisher)

    # -- restart ----------------------------------------------------------------------

    def recover(self) -> None:
        """After a restart: watch or finish this host's running rows, rebuild the pending list."""
        self._check_host_runs(unstarted_only=False)
        self.rescan(host_runs=False)

    def _check_host_runs(self, *, unstarted_only: bool) -> None:
        """Adopt this host's running rows nobody here watches; requeue those claimed but never started.

        A row without a pid is left alone during the claim grace (another launcher on this host
        may be starting it right now). ``unstarted_only`` looks only at rows without a pid: the
        periodic re-check for a row that was still in its grace when ``recover`` ran.
        """
        now = time.time()
        for run in running_on_host(self.host):
            run_id = str(run.id)
            if run_id in self.running or (unstarted_only and run.pid is not None):
                continue
            files = run_files(self.data_dir, run)
            if run.pid is None:
                claimed = run.claimed_at.timestamp() if run.claimed_at else 0.0
                if now - claimed < self.config.claim_grace_seconds:
                    continue  # maybe being started right now by another launcher on this host
                pid = find_run_process(run_id, run.attempt) if files.log.exists() else None
                if pid is None and not files.log.exists():
                    if requeue_unstarted(run_id, run.attempt):
                        logger.warning("run %s: claimed but never started; queued again", run_id)
                    continue
                # Started but its pid never reached run_log: watch it (or finish it) by its files.
                run.pid = pid or 0
            job = self.catalog.jobs.get(run.job)
            limit = job.time_limit_seconds if job is not None else float("inf")
            began = run.started_at or run.claimed_at
            started = began.timestamp() if began is not None else now
            self.running[run_id] = Running(
                run_id, run.attempt, run.pid, files.exit, deadline=started + limit, limit_seconds=limit
            )
            self.stats.adopted += 1
            logger.info("run %s: adopted pid %s from an earlier launcher", run_id, run.pid)

    def rescan(self, *, host_runs: bool = True) -> None:
        """Add every queued run_log row to the pending list (oldest first).

        With ``host_runs``, first re-check this host's running rows without a pid whose claim
        grace has passed, so a row claimed just before a quick restart is not stranded.
        """
        if host_runs:
            self._check_host_runs(unstarted_only=True)
        for run_id, attempt in queued_runs():
            if run_id not in self.running:
                self.pending.setdefault(run_id, attempt)

    # -- the loop -----------------------------------------------------------------------

    def request_stop(self, *_args: object) -> None:
        """Stop taking new runs; ``run`` then waits for the running ones (shutdown grace)."""
        self._stop = True

    def step(self, *, timeout: float | None = None) -> None:
        """One loop turn: read the broker, reap, start, and drain/rescan when due."""
        now = time.monotonic()
        wait = self.config.poll_seconds if timeout is None else timeout
        if now >= self._next_connect:
            try:
                self.consumer.poll(wait)
                wait = 0.0
            except BrokerUnavailable as exc:
                logger.warning("job_runs consumer: %s; retrying in 2 s", exc)
                self._next_connect = now + 2.0
            except KickoffError as exc:
                logger.error("job_runs consumer: %s; retrying in 5 s", exc)
                self._next_connect = now + 5.0
        if wait:
            time.sleep(wait)
        self.reap()
        if now >= self._next_rescan:
            self.rescan()
            self._next_rescan = now + self.config.rescan_interval_seconds
        self.start_pending()
        if now >= self._next_drain:
            self._next_drain = now + self.config.drain_interval_seconds
            drain_job_runs(publisher=self.publisher, batch=self.config.drain_batch)

    def run(self, *, install_signals: bool = True, until: float | None = None) -> LauncherStats:
        """Run until SIGTERM/SIGINT (or ``until`` seconds); then wait for running jobs (grace)."""
        if install_signals:
            signal.signal(signal.SIGTERM, self.request_stop)
            signal.signal(signal.SIGINT, self.request_stop)
        deadline = None if until is None else time.monotonic() + until
        with database_errors():
            self.recover()
        self._next_rescan = time.monotonic() + self.config.rescan_interval_seconds
        logger.info(
            "launcher on %s: cap %s, %s pending, %s adopted",
            self.host,
            self.config.cap,
            len(self.pending),
            len(self.running),
        )
        while not self._stop and (deadline is None or time.monotonic() < deadline):
            try:
                with database_errors():
                    self.step()
            except DatabaseUnavailable as exc:
                logger.warning("launcher: %s; retrying in 2 s", exc)
                time.sleep(2.0)
        self.shutdown()
        return self.stats

    def shutdown(self) -> None:
        """Stop consuming, wait up to the grace for running jobs; the rest are adopted on restart."""
        self.consumer.close()
        end = time.monotonic() + self.config.shutdown_grace_seconds
        while self.running and time.monotonic() < end:
            with database_errors():
                self.reap()
            time.sleep(0.05)
        if self.running:
            logger.warning(
                "launcher exiting with %s runs still running (adopted on restart)", len(self.running)
            )
        logger.info(
            "launcher stopped: %s accepted, %s set aside, %s started, %s finished, %s skipped,"
            " max %s running",
            self.stats.accepted,
            self.stats.rejected,
            self.stats.started,
            self.stats.finished,
            self.stats.skipped,
            self.stats.max_running,
        )

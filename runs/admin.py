"""Operator actions on one run: cancel it while queued, retry it once it ended, read its log."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from config.clock import utcnow
from config.records import json_fields
from models.audit import AuditContext
from models.boundary import transaction
from models.run_log import RunLog, RunStatus, cancel_queued_run, locked_run
from publisher.errors import TriggerConflictError
from runs.errors import RunError, RunNotFound
from runs.publish import CommandPublisher, enqueue_retry, get_run, send_outbox_rows

logger = logging.getLogger(__name__)

#: Runs an operator may retry: they ended without success.
RETRYABLE = frozenset({RunStatus.FAILED.value, RunStatus.SKIPPED.value})


def cancel_run(run_id: str, *, audit: AuditContext | None = None) -> RunLog:
    """End a queued run as skipped (reason ``cancelled``); a launcher then never starts it.

    A run that is running or ended is a TriggerConflictError naming its status (nothing changes):
    cancel stops no process. With ``audit``, the cancel is audited (run.cancel) in its transaction.
    """
    run = get_run(run_id)  # RunNotFound
    now = utcnow()
    with transaction():
        changed = cancel_queued_run(run.id, at=now)
        if changed and audit is not None:
            audit.record(
                "run.cancel",
                "run",
                str(run.id),
                before={"status": RunStatus.QUEUED.value},
                after={"status": RunStatus.SKIPPED.value},
            )
    if not changed:
        current = get_run(run_id).status
        raise TriggerConflictError(f"run {run.id} is {current}: only a queued run can be cancelled")
    logger.info("run %s of %s cancelled by an operator", run.id, run.job)
    return get_run(run_id)


@dataclass(frozen=True)
class RetryAnswer:
    """A retried run: its id, the new attempt and whether RabbitMQ confirmed the command."""

    run_id: str
    job: str
    attempt: int
    published: bool

    def as_dict(self) -> dict[str, object]:
        return {**json_fields(self), "status": "queued" if self.published else "pending"}


def retry_run(
    run_id: str,
    *,
    publisher: CommandPublisher | None,
    audit: AuditContext | None = None,
) -> RetryAnswer:
    """Queue the next attempt of a failed or skipped run (beyond its retry budget) and publish it.

    ``queued`` when RabbitMQ confirmed the command, else ``pending`` (the drain publishes it). A
    queued, running or succeeded run is a TriggerConflictError naming its status. With ``audit``,
    the retry is audited (run.retry) in its transaction.
    """
    with transaction():
        run = locked_run(get_run(run_id).id)
        if run is None:  # deleted since get_run read it
            raise RunNotFound(f"no run {run_id} in run_log")
        if run.status not in RETRYABLE:
            raise TriggerConflictError(
                f"run {run.id} is {run.status}: only a failed or skipped run can be retried"
            )
        before = {"status": run.status, "attempt": run.attempt}
        outbox_id = enqueue_retry(run)
        if audit is not None:
            audit.record(
                "run.retry",
                "run",
                str(run.id),
                before=before,
                after={"status": RunStatus.QUEUED.value, "attempt": run.attempt},
            )
    published = bool(publisher is not None and send_outbox_rows([outbox_id], publisher=publisher).published)
    logger.info("run %s of %s: attempt %s queued by an operator", run.id, run.job, run.attempt)
    return RetryAnswer(run_id=str(run.id), job=run.job, attempt=run.attempt, published=published)


def run_log_tail(run_id: str, *, lines: int) -> tuple[RunLog, list[str]]:
    """The run and the last ``lines`` lines of its current attempt's log file.

    RunError when the run never started (no log yet) or its log file is gone.
    """
    run = get_run(run_id)
    if not run.log_path:
        raise RunError(f"run {run.id} is {run.status} and has no log yet (it never started)")
    path = Path(run.log_path)
    try:
        with path.open(errors="replace") as fh:
            tail = list(deque((line.rstrip("\n") for line in fh), maxlen=lines))
    except OSError as exc:
        raise RunError(f"cannot read the log of run {run.id} at {path}: {exc.strerror or exc}") from exc
    return run, tail

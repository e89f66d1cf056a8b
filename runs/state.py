"""The launcher's run_log transitions: claim (expiry, overlap), started, finished (retry, chain)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from config.clock import utcnow
from models.boundary import transaction
from models.run_log import (
    RunLog,
    RunStatus,
    SkipReason,
    Trigger,
    lock_runs_of_job,
    locked_run_at,
    other_running_run,
    queued_run_attempts,
    record_run_started,
    requeue_unstarted_run,
    run_status_and_attempt,
    runs_running_on_host,
    save_run,
)
from runs.catalog import Catalog, Job, Overlap
from runs.errors import InvalidRunParams, RunError, UnknownJob
from runs.publish import enqueue_retry, enqueue_run

logger = logging.getLogger(__name__)

LOST = "lost"  # reason of an attempt whose process vanished without an exit code


@dataclass(frozen=True)
class Claim:
    """The outcome of trying to take a queued run: ``run`` to start, or why not."""

    run: RunLog | None  # the claimed row (status running), None when not claimed
    job: Job | None = None
    skipped: SkipReason | None = None  # set when the claim ended the run skipped
    note: str = ""  # why nothing was claimed (stale, unknown job)


@dataclass(frozen=True)
class Finish:
    """What finishing an attempt did: the final or requeued status and outbox rows to publish."""

    status: RunStatus | None  # None when the attempt was already finished by someone else
    outbox_ids: list[int] = field(default_factory=list)
    retry_attempt: int | None = None  # the attempt queued for a retry
    successors: list[str] = field(default_factory=list)  # run ids published as chain successors


def is_pending(run_id: str, attempt: int) -> bool:
    """True when the run is still queued at ``attempt`` (the launcher's check before acking)."""
    row = run_status_and_attempt(uuid.UUID(run_id))
    return row is not None and row[0] == RunStatus.QUEUED.value and row[1] == attempt


def queued_runs(limit: int = 10_000) -> list[tuple[str, int]]:
    """(run id, attempt) of every queued run, oldest first: the launcher's list after a restart."""
    return queued_run_attempts(limit)


def _end(run: RunLog, status: RunStatus, *, now: datetime, reason: str | None = None) -> None:
    run.status = status.value
    run.reason = reason
    run.ended_at = now
    if run.started_at is not None:
        run.duration_seconds = (now - run.started_at).total_seconds()
    save_run(run)


def _locked_attempt(run_id: str, attempt: int, status: RunStatus) -> RunLog | None:
    """The run's row locked FOR UPDATE (caller's transaction), if it is at ``attempt`` in ``status``."""
    return locked_run_at(uuid.UUID(run_id), attempt, status)


def claim(run_id: str, attempt: int, *, catalog: Catalog, host: str) -> Claim:
    """Take a queued run for this launcher, or end it skipped (expired / overlap).

    An initial attempt that never started is expired at ``expires_at``; a retry of an attempt
    that already started keeps its budget. ``overlap: forbid`` jobs are checked under an
    advisory lock per job, so two launchers cannot both start one.
    """
    now = utcnow()
    with transaction():
        run = _locked_attempt(run_id, attempt, RunStatus.QUEUED)
        if run is None:
            return Claim(None, note="not queued at this attempt")
        try:
            job = catalog.job(run.job)
        except UnknownJob as exc:
            run.error = str(exc)
            _end(run, RunStatus.FAILED, now=now, reason="unknown job")
            logger.error("run %s: %s", run.id, exc)
            return Claim(None, note="unknown job")
        initial = run.attempt == 1 and run.first_started_at is None
        if initial and run.expires_at is not None and now >= run.expires_at:
            _end(run, RunStatus.SKIPPED, now=now, reason=SkipReason.EXPIRED.value)
            logger.info("run %s of %s skipped: expired at %s", run.id, run.job, run.expires_at)
            return Claim(None, job=job, skipped=SkipReason.EXPIRED)
        if job.overlap is Overlap.FORBID:
            lock_runs_of_job(job.name)
            other = other_running_run(job.name, besides=run.id)
            if other is not None:
                run.error = f"run {other.id} of {job.name} was running"
                _end(run, RunStatus.SKIPPED, now=now, reason=SkipReason.OVERLAP.value)
                logger.info("run %s of %s skipped: overlap with run %s", run.id, run.job, other.id)
                return Claim(None, job=job, skipped=SkipReason.OVERLAP)
        run.status = RunStatus.RUNNING.value
        run.claimed_at = now
        run.host = host
        run.pid = None
        save_run(run)
    return Claim(run, job=job)


def mark_started(run: RunLog, *, pid: int, log_path: str) -> None:
    """Record the started process of the run's current attempt."""
    now = utcnow()
    record_run_started(run.id, run.attempt, pid=pid, at=now, log_path=log_path)
    run.pid = pid
    run.started_at = now
    run.first_started_at = run.first_started_at or now
    run.log_path = log_path


def _publish_successors(run: RunLog, *, catalog: Catalog, job: Job) -> tuple[list[int], list[str]]:
    """Queue the job's chain successors of a succeeded run (caller's transaction)."""
    ids: list[int] = []
    run_ids: list[str] = []
    root = run.chain_root or run.id
    for name in job.successors:
        successor = catalog.job(name)
        params = dict(run.params or {})
        try:
            successor.validate_params(params)
        except InvalidRunParams:
            params = {}
        try:
            result, outbox_id = enqueue_run(
                name, params, trigger=Trigger.CHAIN, catalog=catalog, chain_root=root, parent_id=run.id
            )
        except RunError as exc:
            logger.error("run %s: cannot publish successor %s: %s", run.id, name, exc)
            continue
        if outbox_id is not None:
            ids.append(outbox_id)
        run_ids.append(result.run_id)
    return ids, run_ids


def finish(
    run_id: str, attempt: int, *, exit_code: int | None, catalog: Catalog, reason: str | None = None
) -> Finish:
    """Record how attempt ``attempt`` ended: succeeded (and chain successors), a retry, or failed.

    Only a run still running at that attempt changes, so two watchers cannot both finish it.
    """
    now = utcnow()
    with transaction():
        run = _locked_attempt(run_id, attempt, RunStatus.RUNNING)
        if run is None:
            return Finish(None)
        run.exit_code = exit_code
        if exit_code == 0:
            _end(run, RunStatus.SUCCEEDED, now=now)
            try:
                job = catalog.job(run.job)
            except UnknownJob:
                return Finish(RunStatus.SUCCEEDED)
            ids, successors = _publish_successors(run, catalog=catalog, job=job)
            logger.info("run %s of %s succeeded (attempt %s)", run.id, run.job, attempt)
            return Finish(RunStatus.SUCCEEDED, outbox_ids=ids, successors=successors)
        what = reason or f"exit code {exit_code}"
        run.error = f"attempt {attempt}: {what}"
        if run.started_at is not None:
            run.duration_seconds = (now - run.started_at).total_seconds()
        run.ended_at = now
        if run.attempt <= run.retry_budget:
            outbox_id = enqueue_retry(run)
            return Finish(RunStatus.QUEUED, outbox_ids=[outbox_id], retry_attempt=run.attempt)
        _end(run, RunStatus.FAILED, now=now, reason=reason)
        logger.info("run %s of %s failed (attempt %s, %s)", run.id, run.job, attempt, what)
        return Finish(RunStatus.FAILED)


def requeue_unstarted(run_id: str, attempt: int) -> bool:
    """Put a claimed run whose process never started back to queued at the same attempt."""
    return requeue_unstarted_run(uuid.UUID(run_id), attempt)


def running_on_host(host: str) -> list[RunLog]:
    """Running rows this host's launchers claimed (after a restart: orphans to adopt or finish)."""
    return runs_running_on_host(host)

"""publish_run and drain_job_runs: run_log row + run outbox in one transaction, then job_runs.

The run outbox drains in the one drain of every outbox (publisher.outbox_drain; ``RunOutbox``
supplies its rows and marks)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from config import spans
from config.clock import utcnow
from config.records import json_fields
from config.set_aside import set_aside
from config.settings import mask_urls_deep
from models.audit import AuditContext
from models.boundary import transaction
from models.run_log import (
    JobRunOutbox,
    RunLog,
    RunStatus,
    Trigger,
    add_run_outbox_row,
    dead_run_outbox_count,
    insert_queued_run,
    lock_unpublished_outbox_rows,
    newest_dead_run_outbox_rows,
    newest_runs,
    pending_run_outbox_count,
    run_by_dedupe_key,
    run_by_id,
    runs_by_ids,
    save_run,
    save_run_outbox_row,
    set_run_created_by,
)
from publisher.amqp import OutgoingMessage, PublishOutcome
from publisher.errors import PublishError
from publisher.outbox_drain import DrainReport, MessagePublisher, Sendable, drain, send_claimed
from publisher.queues import JOB_RUNS
from publisher.trace import trace_headers
from runs.catalog import Catalog
from runs.command import RunCommand
from runs.dedupe import dedupe_key_for
from runs.errors import InvalidRunCommand, RunNotFound

logger = logging.getLogger(__name__)

#: The drain's name where it sets a row aside (config.set_aside).
DRAIN_LOOP = "run drain"


#: What sends RunCommands: publisher.amqp.AmqpPublisher (confirmed, mandatory, passive declare).
CommandPublisher = MessagePublisher

#: The DrainReport fields of a run outbox drain (``kickoff runs drain --json``, tick_job_runs).
REPORT_FIELDS = ("published", "stale", "failed", "dead")


@dataclass(frozen=True)
class PublishResult:
    """What publish_run did: a new run ``queued`` (the broker confirmed its command) or ``pending``
    (saved; the drain or the launcher's rescan takes it), or a ``duplicate`` of its dedupe key."""

    status: str  # "queued" | "pending" | "duplicate"
    run_id: str
    job: str
    dedupe_key: str
    published: bool = False  # the RunCommand reached job_runs now (else the drain sends it)

    to_dict = json_fields


def command_message(command: RunCommand) -> OutgoingMessage:
    """The job_runs message of ``command``."""
    return OutgoingMessage(queue=JOB_RUNS, body=command.to_dict(), message_id=command.message_id)


def enqueue_run(
    job_name: str,
    params: Mapping[str, Any] | None = None,
    *,
    trigger: Trigger | str,
    catalog: Catalog,
    slot: datetime | None = None,
    chain_root: uuid.UUID | str | None = None,
    event_key: str | None = None,
    debounce_seconds: float | None = None,
    parent_id: uuid.UUID | str | None = None,
    default_debounce_seconds: float = 60.0,
) -> tuple[PublishResult, int | None]:
    """Write the queued run_log row and its job_run_outbox row (inside the caller's transaction).

    Returns the result and the outbox row id to publish (None for a duplicate).
    """
    trigger = Trigger(trigger)
    job = catalog.job(job_name)
    params = dict(params or {})
    job.validate_params(params)
    now = utcnow()
    run_id = uuid.uuid4()
    key = dedupe_key_for(
        job,
        trigger,
        run_id=run_id,
        now=now,
        slot=slot,
        chain_root=chain_root,
        event_key=event_key,
        debounce_seconds=debounce_seconds,
        default_debounce_seconds=default_debounce_seconds,
    )
    inserted = insert_queued_run(
        id=run_id,
        job=job.name,
        trigger=trigger.value,
        dedupe_key=key,
        params=params,
        status=RunStatus.QUEUED.value,
        attempt=1,
        retry_budget=job.retries,
        parent=parent_id,
        chain_root=chain_root if trigger is Trigger.CHAIN else None,
        queued_at=now,
        expires_at=now + timedelta(seconds=job.expires_after_seconds),
        traceparent=spans.current_traceparent(),  # its publish and the launcher's run continue this trace
    )
    if not inserted:
        existing = run_by_dedupe_key(key)
        logger.info("run %s of %s: duplicate of dedupe key %s", existing.id, job.name, key)
        return PublishResult("duplicate", str(existing.id), job.name, key), None
    command = RunCommand(
        run_id=str(run_id),
        job=job.name,
        attempt=1,
        trigger=trigger.value,
        dedupe_key=key,
        parent_id=None if parent_id is None else str(parent_id),
    )
    outbox_id = add_run_outbox_row(run_id, 1, command.to_dict(), created_at=now)
    logger.info("run %s of %s queued (%s, key %s)", run_id, job.name, trigger.value, key)
    return PublishResult("pending", str(run_id), job.name, key), outbox_id


def enqueue_retry(run: RunLog) -> int:
    """Queue the next attempt of ``run`` (caller's transaction): row back to queued, new outbox row."""
    run.status = RunStatus.QUEUED.value
    run.attempt += 1
    run.pid = None
    run.claimed_at = None
    run.started_at = None
    run.host = None
    run.ended_at = None  # the failed attempt's exit code and error stay until the next one ends
    save_run(run)
    command = RunCommand(
        run_id=str(run.id),
        job=run.job,
        attempt=run.attempt,
        trigger=run.trigger,
        dedupe_key=run.dedupe_key,
        parent_id=None if run.parent_id is None else str(run.parent_id),
    )
    outbox_id = add_run_outbox_row(run.id, run.attempt, command.to_dict())
    logger.info("run %s of %s: attempt %s queued", run.id, run.job, run.attempt)
    return outbox_id


def publish_run(
    job_name: str,
    params: Mapping[str, Any] | None = None,
    *,
    trigger: Trigger | str,
    publisher: CommandPublisher | None,
    audit: AuditContext | None = None,
    **run: Any,
) -> PublishResult:
    """Validate ``job_name`` and ``params`` against the catalog, save the queued run and its
    RunCommand in one transaction, then publish the command to job_runs.

    An ``event`` run needs ``event_key``; ``debounce_seconds`` (else the job's, else
    ``default_debounce_seconds``) sets its window, so one key in one window is one run. A used
    dedupe key returns the existing run as ``duplicate``. The answer is ``queued`` only
    when the broker confirmed the command; a failed publish answers ``pending`` and leaves the
    outbox row for drain_job_runs (with ``publisher`` None it is left to the drain on purpose).
    With ``audit``, a new run is audited (run.publish) in the run's transaction. ``run`` holds
    ``enqueue_run``'s keywords: ``catalog`` (required), ``slot``, ``chain_root``, ``event_key``,
    ``debounce_seconds``, ``parent_id``, ``default_debounce_seconds``.
    """
    with transaction():
        result, outbox_id = enqueue_run(job_name, params, trigger=trigger, **run)
        if audit is not None and audit.actor.key_id is not None and outbox_id is not None:
            set_run_created_by(result.run_id, audit.actor.key_id)
        if audit is not None and outbox_id is not None:
            audit.record(
                "run.publish",
                "run",
                str(result.run_id),
                after={"job": result.job, "params": dict(params or {}), "trigger": str(trigger)},
            )
    if outbox_id is None:
        return result
    if publisher is not None and send_outbox_rows([outbox_id], publisher=publisher).published:
        return PublishResult("queued", result.run_id, result.job, result.dedupe_key, published=True)
    return result


def _outgoing(row: JobRunOutbox, traceparent: str | None = None) -> OutgoingMessage:
    """The row's job_runs message (in the run's trace: ``traceparent``), encoded now; InvalidRunCommand if
    its payload cannot be sent."""
    command = RunCommand.from_dict(row.payload)
    if command.run_id != str(row.run_id) or command.attempt != row.attempt:
        raise InvalidRunCommand(
            f"the payload is run {command.run_id} attempt {command.attempt}, "
            f"the row run {row.run_id} attempt {row.attempt}"
        )
    message = replace(command_message(command), headers=trace_headers(traceparent))
    try:
        return replace(message, raw=message.encoded())
    except (TypeError, ValueError) as exc:
        raise InvalidRunCommand(f"the RunCommand cannot be encoded: {exc}") from exc


def _set_aside(row: JobRunOutbox, reason: str, *, now: datetime) -> None:
    """Mark ``row`` dead with its reason (the drain never takes it again); count and log it."""
    row.dead_at = now
    row.last_error = f"dead: {reason}"[:500]
    save_run_outbox_row(row)
    set_aside(DRAIN_LOOP, f"run outbox row {row.id} (run {row.run_id} attempt {row.attempt})", reason)


@dataclass(frozen=True)
class RunOutbox:
    """The run outbox as the drain (publisher.outbox_drain) sees it: unpublished live rows, rows of
    runs that moved on marked without sending (stale), rows that are not their run's RunCommand set
    aside (dead); a refused publish leaves the row for the next drain."""

    report_fields: tuple[str, ...] = field(default=REPORT_FIELDS, init=False)

    def claim(self, limit: int, *, now: datetime) -> list[JobRunOutbox]:
        return lock_unpublished_outbox_rows(limit=limit)

    def sendable(self, rows: Sequence[JobRunOutbox], *, now: datetime) -> Sendable[JobRunOutbox]:
        runs = runs_by_ids([row.run_id for row in rows])
        live: list[JobRunOutbox] = []
        messages: list[OutgoingMessage] = []
        stale = dead = 0
        for row in rows:
            run = runs.get(row.run_id)
            if run is None or run.status != RunStatus.QUEUED.value or run.attempt != row.attempt:
                row.published_at = now
                row.last_error = "stale: the run was no longer queued at this attempt; not sent"
                save_run_outbox_row(row)
                stale += 1
                continue
            try:
                messages.append(_outgoing(row, run.traceparent))
            except InvalidRunCommand as exc:
                _set_aside(row, str(exc), now=now)
                dead += 1
                continue
            live.append(row)
        return Sendable(live, messages, DrainReport(stale=stale, dead=dead))

    def record(
        self, rows: Sequence[JobRunOutbox], outcomes: Sequence[PublishOutcome], *, now: datetime
    ) -> DrainReport:
        published = failed = 0
        for row, outcome in zip(rows, outcomes, strict=True):
            row.tries += 1
            if outcome.confirmed:
                row.published_at = now
                row.last_error = None
                published += 1
            else:
                row.last_error = str(outcome.error)[:500]
                failed += 1
                logger.warning(
                    "run %s attempt %s: publish failed: %s", row.run_id, row.attempt, outcome.error
                )
            save_run_outbox_row(row)
        return DrainReport(published=published, failed=failed)


RUN_OUTBOX = RunOutbox()


def send_outbox_rows(ids: Sequence[int], *, publisher: CommandPublisher) -> DrainReport:
    """Publish the given unpublished outbox rows now (rows another sender holds are skipped)."""
    if not ids:
        return DrainReport()
    with transaction():
        rows = lock_unpublished_outbox_rows(ids=list(ids))
        if not rows:
            return DrainReport()
        try:
            return send_claimed(RUN_OUTBOX, rows, publisher=publisher)
        except PublishError as exc:  # defensive: publish_many reports per message
            logger.warning("job_runs publish failed: %s", exc)
            return DrainReport(failed=len(rows))


def drain_job_runs(
    *, publisher: CommandPublisher, batch: int = 100, audit: AuditContext | None = None
) -> DrainReport:
    """Publish up to ``batch`` unpublished run outbox rows, oldest first; safe to call concurrently.

    Called by the drain actor and by the launcher loop. Each row is handled on its own: rows of
    runs that moved on are marked without sending; a row whose payload is not its run's
    RunCommand, or cannot be encoded, is set aside (dead_at, reason in last_error, counted in
    kickoff_items_set_aside_total{loop="run drain"}, one log line) and the others are sent; rows the broker
    refused stay for the next call. One batch of the one outbox drain (publisher.outbox_drain). With
    ``audit`` (an operator's drain), the drain is audited (runs.drain) before it starts.
    """
    if audit is not None:
        audit.record("runs.drain", "run_outbox", None, after={"batch": batch})
    report = drain(RUN_OUTBOX, publisher=publisher, batch_size=batch, max_batches=1)
    if report.published or report.failed or report.dead:
        logger.info(
            "drain_job_runs: %s published, %s stale, %s failed, %s dead",
            report.published,
            report.stale,
            report.failed,
            report.dead,
        )
    return report


def pending_outbox_count() -> int:
    """How many run outbox rows wait for a publish (dead rows never will)."""
    return pending_run_outbox_count()


def dead_outbox_count() -> int:
    """How many run outbox rows were set aside (dead_at set; their reason is in last_error)."""
    return dead_run_outbox_count()


def dead_outbox_rows(*, limit: int = 50) -> list[dict[str, Any]]:
    """The newest ``limit`` run outbox rows the drain set aside, newest first, with their reason."""
    return [
        {
            "id": row.id,
            "run_id": str(row.run_id),
            "attempt": row.attempt,
            "dead_at": row.dead_at,
            "reason": row.last_error,
            "payload": row.payload,
        }
        for row in newest_dead_run_outbox_rows(limit)
    ]


def run_not_found(run_id: uuid.UUID | str) -> RunNotFound:
    """The error of a run id no run has: also what a key limited to leagues is answered for a run
    another key published (the same words, so the answer does not tell that it exists)."""
    return RunNotFound(f"no run {run_id} in run_log")


def get_run(run_id: uuid.UUID | str) -> RunLog:
    """The run_log row ``run_id`` or RunNotFound."""
    try:
        key = uuid.UUID(str(run_id))
    except ValueError as exc:
        raise RunNotFound(f"{run_id!r} is not a run id (a UUID)") from exc
    run = run_by_id(key)
    if run is None:
        raise run_not_found(run_id)
    return run


def recent_runs(*, job: str | None = None, status: str | None = None, limit: int = 50) -> list[RunLog]:
    """The newest ``limit`` runs, newest first, optionally of one job and one status (CLI, API)."""
    return newest_runs(job=job, status=status, limit=limit)


#: The fields of ``run_dict`` a caller chose or a failure wrote: masked for every reader but an admin.
CALLER_TEXT_FIELDS = ("params", "reason", "error")


def masked_run(run: dict[str, Any]) -> dict[str, Any]:
    """``run`` (a run_dict) as a reader that is not an admin sees it: every URL in its params, reason
    and error masked (passwords, ``?api_key=`` and other secret query values as ``***``). A run
    published before params could not name places (issue 35) may hold a feed URL with its secret."""
    return {**run, **{k: mask_urls_deep(run[k]) for k in CALLER_TEXT_FIELDS}}


def run_dict(run: RunLog) -> dict[str, Any]:
    """A run_log row as a JSON-ready dict."""
    return {
        "run_id": str(run.id),
        "job": run.job,
        "trigger": run.trigger,
        "dedupe_key": run.dedupe_key,
        "status": run.status,
        "reason": run.reason,
        "attempt": run.attempt,
        "retry_budget": run.retry_budget,
        "params": run.params,
        "parent_id": None if run.parent_id is None else str(run.parent_id),
        "chain_root": None if run.chain_root is None else str(run.chain_root),
        "queued_at": run.queued_at,
        "expires_at": run.expires_at,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "duration_seconds": run.duration_seconds,
        "exit_code": run.exit_code,
        "log_path": run.log_path,
        "host": run.host,
        "pid": run.pid,
        "error": run.error,
        "created_by_key_id": None if run.created_by_key_id is None else str(run.created_by_key_id),
        "trace_id": spans.trace_id_of(run.traceparent),
    }

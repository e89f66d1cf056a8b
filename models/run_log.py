"""RunLog and JobRunOutbox: one row per job run, and the run outbox that carries its RunCommands."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

import peewee
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField
from models.boundary import translate_database_errors
from models.db import database


class RunStatus(StrEnum):
    """Where a run is in its life (run_log.status)."""

    QUEUED = "queued"  # written by publish_run (or a retry); waiting for a launcher slot
    RUNNING = "running"  # claimed by a launcher; the job process is (about to be) running
    SUCCEEDED = "succeeded"  # the job process exited 0
    FAILED = "failed"  # the job process exited non-zero (or was lost) and no retry is left
    SKIPPED = "skipped"  # never started: expired or refused by overlap (reason says which)


#: Statuses a run never leaves.
FINAL_STATUSES: frozenset[RunStatus] = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.SKIPPED})


class Trigger(StrEnum):
    """What asked for a run; decides its dedupe key (see runs.dedupe.dedupe_key_for)."""

    SCHEDULE = "schedule"  # a cron slot of the catalog: job@slot
    CHAIN = "chain"  # a successor of a run that succeeded: job@chain_root
    EVENT = "event"  # an event with a key, debounced: job@key@debounce_window
    MANUAL = "manual"  # an operator (Jobs API): a fresh UUID, the run id
    CLI = "cli"  # `kickoff runs publish`: a fresh UUID, the run id
    MCP = "mcp"  # an MCP tool call: a fresh UUID, the run id
    SCOPE = "scope"  # a child run recorded by a nested run_scope (never published)


class SkipReason(StrEnum):
    """Why a run ended skipped (run_log.reason)."""

    EXPIRED = "expired"  # the initial attempt was still queued at expires_at
    OVERLAP = "overlap"  # overlap: forbid and another run of the job was running
    CANCELLED = "cancelled"  # an operator cancelled it while it was queued (kickoff runs cancel)


class RunLog(BaseModel):
    """One job run: its trigger, dedupe key, attempts and outcome."""

    id = peewee.UUIDField(primary_key=True, default=uuid.uuid4)
    job = peewee.TextField()  # the catalog job name (a child scope's own name for SCOPE runs)
    trigger = peewee.TextField()  # a Trigger value
    dedupe_key = peewee.TextField(unique=True)
    params = BinaryJSONField(default=dict)
    status = peewee.TextField(default=RunStatus.QUEUED.value)  # a RunStatus value
    reason = peewee.TextField(null=True)  # a SkipReason value, or "lost", or the failure
    attempt = peewee.IntegerField(default=1)  # the current attempt, 1 for the initial one
    retry_budget = peewee.IntegerField(default=0)  # retries allowed after the initial attempt
    parent = peewee.ForeignKeyField("self", null=True, backref="children", on_delete="SET NULL")
    chain_root = peewee.UUIDField(null=True)
    queued_at = UTCDateTimeField(default=utcnow)
    expires_at = UTCDateTimeField(null=True)
    claimed_at = UTCDateTimeField(null=True)  # when a launcher took the current attempt
    started_at = UTCDateTimeField(null=True)  # when the current attempt's process started
    first_started_at = UTCDateTimeField(null=True)  # when any attempt first started
    ended_at = UTCDateTimeField(null=True)
    duration_seconds = peewee.DoubleField(null=True)
    exit_code = peewee.IntegerField(null=True)
    log_path = peewee.TextField(null=True)
    host = peewee.TextField(null=True)  # the launcher host running the current attempt
    pid = peewee.IntegerField(null=True)  # the pid of the current attempt's process
    error = peewee.TextField(null=True)
    created_by_key_id = peewee.UUIDField(null=True)  # the API key that published it (migration 0018)
    traceparent = peewee.TextField(null=True)  # the trace context it was published in (migration 0045)

    class Meta:
        table_name = "run_log"

    @property
    def job_name(self) -> str:
        """``<job>@<dedupe_key>``: the JOB_NAME a launched process receives."""
        return f"{self.job}@{self.dedupe_key}"


class JobRunOutbox(BaseModel):
    """A RunCommand waiting to reach the job_runs queue (published_at set once confirmed, dead_at
    when it cannot be sent)."""

    id = peewee.BigAutoField()
    run = peewee.ForeignKeyField(RunLog, backref="outbox", on_delete="CASCADE", column_name="run_id")
    attempt = peewee.IntegerField()
    payload = BinaryJSONField()
    created_at = UTCDateTimeField(default=utcnow)
    published_at = UTCDateTimeField(null=True)
    tries = peewee.IntegerField(default=0)
    last_error = peewee.TextField(null=True)
    dead_at = UTCDateTimeField(
        null=True
    )  # set aside: its RunCommand could not be built (last_error says why)

    class Meta:
        table_name = "job_run_outbox"


@translate_database_errors
def run_by_id(run_id: uuid.UUID) -> RunLog | None:
    """The run_log row ``run_id``, or None."""
    return RunLog.get_or_none(RunLog.id == run_id)


@translate_database_errors
def run_counts_by_status() -> dict[str, int]:
    """run_log's rows counted by status (a status without rows left out)."""
    return dict(database.execute_sql("SELECT status, count(*) FROM run_log GROUP BY status").fetchall())


@translate_database_errors
def run_status_and_attempt(run_id: uuid.UUID) -> tuple[str, int] | None:
    """(status, attempt) of run ``run_id``, or None."""
    return RunLog.select(RunLog.status, RunLog.attempt).where(RunLog.id == run_id).tuples().first()


@translate_database_errors
def queued_run_attempts(limit: int) -> list[tuple[str, int]]:
    """(run id, attempt) of the oldest ``limit`` queued runs, oldest first."""
    rows = (
        RunLog.select(RunLog.id, RunLog.attempt)
        .where(RunLog.status == RunStatus.QUEUED.value)
        .order_by(RunLog.queued_at, RunLog.id)
        .limit(limit)
        .tuples()
    )
    return [(str(run_id), attempt) for run_id, attempt in rows]


@translate_database_errors
def locked_run_at(run_id: uuid.UUID, attempt: int, status: RunStatus) -> RunLog | None:
    """Run ``run_id`` locked FOR UPDATE (caller's transaction), if it is at ``attempt`` in ``status``."""
    return (
        RunLog.select()
        .where(RunLog.id == run_id, RunLog.status == status.value, RunLog.attempt == attempt)
        .for_update()
        .first()
    )


@translate_database_errors
def lock_runs_of_job(job: str) -> None:
    """Take job ``job``'s advisory lock until the caller's transaction ends (one claim of it at a time)."""
    database.execute_sql("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"run_log:{job}",))


@translate_database_errors
def other_running_run(job: str, *, besides: uuid.UUID) -> RunLog | None:
    """A running run of ``job`` other than ``besides`` (only its id read), or None."""
    return (
        RunLog.select(RunLog.id)
        .where(RunLog.job == job, RunLog.status == RunStatus.RUNNING.value, RunLog.id != besides)
        .first()
    )


@translate_database_errors
def record_run_started(run_id: uuid.UUID, attempt: int, *, pid: int, at: datetime, log_path: str) -> None:
    """Write the started process of run ``run_id``'s attempt ``attempt`` (first start kept)."""
    RunLog.update(
        pid=pid,
        started_at=at,
        first_started_at=peewee.fn.COALESCE(RunLog.first_started_at, at),
        log_path=log_path,
    ).where(RunLog.id == run_id, RunLog.attempt == attempt).execute()


@translate_database_errors
def requeue_unstarted_run(run_id: uuid.UUID, attempt: int) -> bool:
    """Put run ``run_id`` back to queued if it is running at ``attempt`` with no process yet."""
    with database.atomic():
        n = (
            RunLog.update(status=RunStatus.QUEUED.value, host=None, claimed_at=None)
            .where(
                RunLog.id == run_id,
                RunLog.status == RunStatus.RUNNING.value,
                RunLog.attempt == attempt,
                RunLog.pid.is_null(),
            )
            .execute()
        )
    return n == 1


@translate_database_errors
def runs_running_on_host(host: str) -> list[RunLog]:
    """Running runs that host ``host``'s launchers claimed, by id."""
    return list(
        RunLog.select()
        .where(RunLog.status == RunStatus.RUNNING.value, RunLog.host == host)
        .order_by(RunLog.id)
    )


@translate_database_errors
def cancel_queued_run(run_id: uuid.UUID, *, at: datetime) -> bool:
    """End run ``run_id`` skipped (cancelled) at ``at`` if it is still queued; whether it was."""
    return bool(
        RunLog.update(status=RunStatus.SKIPPED.value, reason=SkipReason.CANCELLED.value, ended_at=at)
        .where(RunLog.id == run_id, RunLog.status == RunStatus.QUEUED.value)
        .execute()
    )


@translate_database_errors
def locked_run(run_id: uuid.UUID) -> RunLog | None:
    """Run ``run_id`` locked FOR UPDATE (caller's transaction), or None."""
    return RunLog.select().where(RunLog.id == run_id).for_update().first()


@translate_database_errors
def create_run(**fields: object) -> RunLog:
    """Store a new run_log row of ``fields``."""
    return RunLog.create(**fields)


@translate_database_errors
def record_run_error(run_id: uuid.UUID, error: str) -> None:
    """Write run ``run_id``'s error text."""
    RunLog.update(error=error).where(RunLog.id == run_id).execute()


@translate_database_errors
def insert_queued_run(**fields: object) -> bool:
    """Store a new run_log row of ``fields`` unless its dedupe key is taken; whether it was stored."""
    return bool(list(RunLog.insert(**fields).on_conflict_ignore().returning(RunLog.id).execute()))


@translate_database_errors
def run_by_dedupe_key(key: str) -> RunLog:
    """The run whose dedupe key is ``key`` (it must exist)."""
    return RunLog.get(RunLog.dedupe_key == key)


@translate_database_errors
def add_run_outbox_row(
    run_id: uuid.UUID, attempt: int, payload: dict[str, object], *, created_at: datetime | None = None
) -> int:
    """Store the job_run_outbox row of run ``run_id``'s ``attempt``; its id."""
    extra = {} if created_at is None else {"created_at": created_at}
    return JobRunOutbox.create(run=run_id, attempt=attempt, payload=payload, **extra).id


@translate_database_errors
def set_run_created_by(run_id: uuid.UUID | str, key_id: str) -> None:
    """Record the API key that published run ``run_id``."""
    RunLog.update(created_by_key_id=key_id).where(RunLog.id == run_id).execute()


@translate_database_errors
def runs_by_ids(run_ids: list[uuid.UUID]) -> dict[uuid.UUID, RunLog]:
    """Run id -> run of those of ``run_ids`` that exist."""
    return {r.id: r for r in RunLog.select().where(RunLog.id.in_(run_ids))}


@translate_database_errors
def lock_unpublished_outbox_rows(
    *, ids: list[int] | None = None, limit: int | None = None
) -> list[JobRunOutbox]:
    """The unpublished, live run outbox rows (among ``ids``; at most ``limit``), oldest first, locked
    FOR UPDATE SKIP LOCKED for the caller's transaction (rows another sender holds are left out)."""
    query = JobRunOutbox.select().where(JobRunOutbox.published_at.is_null(), JobRunOutbox.dead_at.is_null())
    if ids is not None:
        query = query.where(JobRunOutbox.id.in_(ids))
    query = query.order_by(JobRunOutbox.id)
    if limit is not None:
        query = query.limit(limit)
    return list(query.for_update(skip_locked=True))


@translate_database_errors
def pending_run_outbox_count() -> int:
    """How many run outbox rows wait for a publish (dead rows never will)."""
    unpublished = JobRunOutbox.published_at.is_null()
    return JobRunOutbox.select().where(unpublished, JobRunOutbox.dead_at.is_null()).count()


@translate_database_errors
def dead_run_outbox_count() -> int:
    """How many run outbox rows were set aside (dead_at set)."""
    return JobRunOutbox.select().where(JobRunOutbox.dead_at.is_null(False)).count()


@translate_database_errors
def newest_dead_run_outbox_rows(limit: int) -> list[JobRunOutbox]:
    """The newest ``limit`` run outbox rows set aside, newest first."""
    return list(
        JobRunOutbox.select()
        .where(JobRunOutbox.dead_at.is_null(False))
        .order_by(JobRunOutbox.dead_at.desc(), JobRunOutbox.id.desc())
        .limit(limit)
    )


@translate_database_errors
def newest_runs(*, job: str | None = None, status: str | None = None, limit: int = 50) -> list[RunLog]:
    """The newest ``limit`` runs, newest first, of job ``job`` and in ``status`` when given."""
    query = RunLog.select().order_by(RunLog.queued_at.desc()).limit(limit)
    if job:
        query = query.where(RunLog.job == job)
    if status:
        query = query.where(RunLog.status == status)
    return list(query)


@translate_database_errors
def save_run(run: RunLog) -> None:
    """Write ``run``'s changed fields."""
    run.save()


@translate_database_errors
def save_run_outbox_row(row: JobRunOutbox) -> None:
    """Write ``row``'s changed fields."""
    row.save()

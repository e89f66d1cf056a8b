"""run_scope(): what a job process wraps its work in, so its run (and each step) is recorded."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from config import spans
from config.clock import utcnow
from config.settings import KickoffSettings, load_settings
from config.tracing import configure_tracing
from models.db import bound_url, init_database
from models.run_log import RunStatus, Trigger, create_run, record_run_error, run_by_id, save_run
from publisher.run_context import get_run_id, reset_run_id, set_run_id
from runs.errors import RunNotFound
from runs.process import TRACEPARENT_ENV

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunScope:
    """The run a scope records: its id, its job name, and whether it adopted the launcher's row."""

    run_id: str
    job: str
    adopted: bool  # True for the outermost scope of a launched process (the RUN_ID row)
    parent_id: str | None = None


def _ensure_database(settings: KickoffSettings | None) -> None:
    if bound_url() is None:
        init_database((settings or load_settings()).database_url)


def _adopt(run_id: str) -> RunScope:
    try:
        key = uuid.UUID(run_id)
    except ValueError as exc:
        raise RunNotFound(f"RUN_ID {run_id!r} is not a run id") from exc
    run = run_by_id(key)
    if run is None:
        raise RunNotFound(f"RUN_ID {run_id} names no run_log row")
    return RunScope(
        run_id=str(run.id), job=run.job, adopted=True, parent_id=run.parent_id and str(run.parent_id)
    )


def _record_child(name: str, parent_id: str | None) -> RunScope:
    run_id = uuid.uuid4()
    now = utcnow()
    create_run(
        id=run_id,
        job=name,
        trigger=Trigger.SCOPE.value,
        dedupe_key=str(run_id),
        status=RunStatus.RUNNING.value,
        parent=parent_id,
        queued_at=now,
        claimed_at=now,
        started_at=now,
        first_started_at=now,
        pid=os.getpid(),
    )
    return RunScope(run_id=str(run_id), job=name, adopted=False, parent_id=parent_id)


def _close_child(scope: RunScope, error: BaseException | None) -> None:
    now = utcnow()
    run = run_by_id(uuid.UUID(scope.run_id))
    if run is None:
        raise RunNotFound(f"run {scope.run_id} of scope {scope.job} was deleted before it ended")
    run.status = (RunStatus.FAILED if error is not None else RunStatus.SUCCEEDED).value
    run.ended_at = now
    run.duration_seconds = (now - run.started_at).total_seconds() if run.started_at else None
    if error is not None:
        run.error = f"{type(error).__name__}: {error}"[:2000]
    save_run(run)


@contextmanager
def run_scope(name: str, *, settings: KickoffSettings | None = None) -> Iterator[RunScope]:
    """Record the work inside the block as a run and make it the current run id (X-Run-Id).

    The outermost scope of a launched process adopts the row named by RUN_ID and keeps the
    catalog job name (the launcher records its outcome). Any other scope records a child run
    of the enclosing one (trigger ``scope``), finished succeeded or failed when the block ends.

    The block runs in a span: the outermost scope of a launched process sets tracing up from the
    OTEL_* variables it inherited (service ``kickoff-job``) and its ``<job> job`` span continues the
    launcher's (TRACEPARENT); each inner scope is a ``<name> step`` span inside it.
    """
    _ensure_database(settings)
    current = get_run_id()
    env_run_id = os.environ.get("RUN_ID")
    scope = _adopt(env_run_id) if current is None and env_run_id else _record_child(name, current)
    token = set_run_id(scope.run_id)
    logger.debug("run %s: scope %s entered (adopted=%s)", scope.run_id, scope.job, scope.adopted)
    parent = None
    if scope.adopted:
        configure_tracing(service="kickoff-job")
        parent = os.environ.get(TRACEPARENT_ENV)
    error: BaseException | None = None
    try:
        with spans.span(
            f"{scope.job} {'job' if scope.adopted else 'step'}",
            parent=parent,
            attributes={"kickoff.run_id": scope.run_id, "kickoff.job": scope.job},
        ):
            yield scope
    except BaseException as exc:
        error = exc
        raise
    finally:
        reset_run_id(token)
        if not scope.adopted:
            _close_child(scope, error)
        elif error is not None:
            record_run_error(uuid.UUID(scope.run_id), f"{type(error).__name__}: {error}"[:2000])

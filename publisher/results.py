"""Action results: the worker reports into execution_log; a periodic verification settles the action.

A 202 or ``queued`` means the message left kickoff, not that ESPN changed. The consumer reports
each action's outcome (``report_result``: library, ``kickoff actions result``, the HTTP API)
as an execution_log row (``claim_key`` ``result:<tracking id>``, status ``reported``). The
verification step (``verify_results``, the ``verify_action_results`` actor every minute) reads
the reported rows and settles each: ``verified`` (the action becomes ``succeeded``) or
``failed`` with the reason (the action becomes ``failed``). A delivered action with no report
after ACTION_RESULT_TIMEOUT_SECONDS fails as unreported.

A result reported after its action was settled (failed as unreported, which waiver claims waiting
days on ESPN make normal, skipped, or finished by hand) is ``late``: it is kept beside the action
(``execution_log.late``), checked like any other and shown with it, and never changes the settled
action. The verification handles each result on its own: one it cannot settle is set aside with
its reason (``set_aside``, until the consumer reports it again) and the pass goes on; a database
error is no result's fault and fails the pass.
"""

from __future__ import annotations

import json
import logging
import uuid
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from config import spans
from config.clock import utcnow
from config.errors import DatabaseUnavailable, TriggerConflictError, TriggerValidationError
from config.set_aside import set_aside
from models.activity import PENDING_STATUSES, ActionStatus
from models.boundary import transaction
from publisher.actions import action_row, record_result
from publisher.sql import actions as action_sql
from publisher.sql import execute, fetch_all, fetch_one
from publisher.sql import outbox as outbox_sql
from publisher.sql import results as result_sql

logger = logging.getLogger(__name__)

#: The loop's name where it sets an item aside (config.set_aside).
LOOP = "action_verification"

OUTCOMES = frozenset({"succeeded", "failed"})
#: execution_log statuses of a reported result.
REPORTED, VERIFIED, REJECTED = "reported", "verified", "failed"
#: execution_log status of a result the verification could not settle (its reason in ``error``).
SET_ASIDE = "set_aside"
_PENDING = frozenset(s.value for s in PENDING_STATUSES)
_NAMESPACE = uuid.UUID("5f0c1b0e-4a55-4b8e-9d8e-6b1c2a7f0e11")


def _claim_key(tracking_id: str) -> str:
    return f"result:{tracking_id}"


@dataclass(frozen=True)
class VerifyReport:
    """What one verification pass did."""

    verified: list[str] = field(default_factory=list)  # tracking ids now succeeded
    failed: dict[str, str] = field(default_factory=dict)  # tracking id -> reason
    unreported: list[str] = field(default_factory=list)  # delivered, no report within the timeout
    late: list[str] = field(default_factory=list)  # results kept beside an action already settled
    set_aside: dict[str, str] = field(default_factory=dict)  # tracking id -> why it could not be settled

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def report_result(
    tracking_id: str,
    *,
    outcome: str,
    details: dict[str, Any] | None = None,
    reported_by: str | None = None,
) -> dict[str, Any]:
    """Record a consumer's result of one action (``reported``); a repeat before verification replaces it.

    A result for an action already settled (succeeded, failed, skipped) is recorded ``late``: it
    is kept and shown beside the action, which it never changes. A repeat of a result the
    verification set aside replaces it too (``reported`` again: the next pass settles it).
    ActionNotFound for an unknown tracking id; TriggerValidationError for an outcome other than
    succeeded or failed; TriggerConflictError once the result was settled (verified or failed).
    """
    if outcome not in OUTCOMES:
        raise TriggerValidationError("outcome", f"must be one of {sorted(OUTCOMES)}, got {outcome!r}")
    if details is not None and not isinstance(details, dict):
        raise TriggerValidationError("details", "must be an object")
    body = {
        "tracking_id": str(tracking_id),
        "outcome": outcome,
        "details": details or {},
        "reported_by": reported_by,
    }
    now = utcnow()
    with transaction():
        league_id, queue, team, status = action_row(result_sql.SELECT_ACTION, tracking_id)
        late = status not in _PENDING
        key = _claim_key(str(tracking_id))
        row = fetch_one(
            result_sql.UPSERT,
            (
                key,
                queue,
                league_id,
                team,
                uuid.uuid5(_NAMESPACE, key),
                json.dumps(body),
                REPORTED,
                json.dumps(details or {}),
                late,
                now,
                now,
                spans.current_traceparent(),  # the report's span: the verification continues its trace
                [REPORTED, SET_ASIDE],
            ),
        )
        settled = None if row else fetch_one(result_sql.SELECT_STATUS, (key,))[0]
    if row is None:
        raise TriggerConflictError(
            f"the result of {tracking_id} was already settled ({settled}); only a reported or set-aside "
            "result can be reported again"
        )
    logger.info(
        "action result reported: tracking_id=%s outcome=%s by=%s late=%s",
        tracking_id,
        outcome,
        reported_by,
        late,
    )
    return {"tracking_id": str(tracking_id), "status": REPORTED, "outcome": outcome, "late": late}


def _check(
    outcome: str, details: dict[str, Any], *, team: str | None, outbox_status: str | None
) -> str | None:
    """The reason a reported result fails verification, or None when it holds."""
    if outbox_status != "published":
        return "result reported for an action that was never delivered"
    reported_team = details.get("team_id")
    if reported_team is not None and team is not None and str(reported_team) != str(team):
        return f"result reported for team {reported_team}, the action is team {team}"
    if outcome == "failed":
        return str(details.get("error") or "the worker reported a failure")
    return None


def _settle(
    row_id: int,
    body_text: str,
    late: bool,
    tracking_id: str,
    team: str | None,
    status: str,
    delivery: str | None,
    *,
    now: datetime,
    report: VerifyReport,
) -> None:
    """Settle one reported result (caller's savepoint): check it, then apply it unless it is late."""
    body = json.loads(body_text)
    reason = _check(body["outcome"], body.get("details") or {}, team=team, outbox_status=delivery)
    late = late or status not in _PENDING
    if not late:
        try:
            if reason is None:
                record_result(tracking_id, ActionStatus.SUCCEEDED)
            else:
                record_result(tracking_id, ActionStatus.FAILED, error=reason)
        except TriggerConflictError:  # settled since the report (by hand, or another pass)
            late = True
    execute(result_sql.SETTLE, (VERIFIED if reason is None else REJECTED, reason, late, now, row_id))
    if late:
        report.late.append(tracking_id)
        set_aside(
            loop=LOOP,
            kind="late",
            item=f"the result of tracking_id={tracking_id}",
            reason=f"reported after the action was settled; kept beside it ({body['outcome']})",
        )
    elif reason is None:
        report.verified.append(tracking_id)
    else:
        report.failed[tracking_id] = reason


def _set_aside_result(
    row_id: int, tracking_id: str, exc: Exception, *, now: datetime, report: VerifyReport
) -> None:
    reason = f"cannot be settled: {type(exc).__name__}: {exc}"
    execute(result_sql.SETTLE, (SET_ASIDE, reason, False, now, row_id))
    report.set_aside[tracking_id] = reason
    set_aside(
        loop=LOOP,
        kind="unsettled",
        item=f"the result of tracking_id={tracking_id}",
        reason=reason,
    )


def _verification_span(tracking_id: str, traceparent: str | None) -> AbstractContextManager[Any]:
    """The span of one result's verification: in the trace the result was reported in (else the
    action's), linked to the verification pass that settles it."""
    return spans.span(
        "action result verify",
        parent=traceparent,
        attributes={"kickoff.tracking_id": tracking_id},
        links=spans.link_to(spans.current_traceparent()) if traceparent else None,
    )


def verify_results(*, result_timeout_seconds: float, now: datetime | None = None) -> VerifyReport:
    """Settle every reported result (see the module docstring); also fail long-unreported actions.

    Each result and each unreported action is handled in its own savepoint: a late result is kept
    beside its settled action; one that cannot be settled at all is marked ``set_aside`` with its
    reason; either way the pass goes on. Only the database stops it: an outage or a failed
    statement (a timeout, a lock not granted, a lost connection) raises DatabaseUnavailable and
    undoes the pass, which the next one tries again; nothing is set aside for it.
    """
    now = now or utcnow()
    report = VerifyReport()
    with transaction():
        rows = fetch_all(result_sql.SELECT_REPORTED_FOR_UPDATE, (REPORTED,))
        for row_id, body_text, late, tracking_id, team, status, delivery, traceparent in rows:
            try:  # the driver's errors translated per item: an outage is no item's fault
                with transaction(), _verification_span(tracking_id, traceparent):
                    _settle(
                        row_id, body_text, late, tracking_id, team, status, delivery, now=now, report=report
                    )
            except DatabaseUnavailable:
                raise
            except Exception as exc:  # one result never stops the pass
                _set_aside_result(row_id, tracking_id, exc, now=now, report=report)
        stale = fetch_all(
            action_sql.SELECT_UNREPORTED_SINCE,
            (
                ActionStatus.DELIVERED.value,
                ActionStatus.RUNNING.value,
                now - timedelta(seconds=result_timeout_seconds),
            ),
        )
        for (tracking_id,) in stale:
            reason = f"no result reported within {result_timeout_seconds:g} s of delivery"
            try:
                with transaction():
                    record_result(tracking_id, ActionStatus.FAILED, error=reason)
            except DatabaseUnavailable:
                raise
            except Exception as exc:  # e.g. settled by hand since the query
                set_aside(
                    loop=LOOP,
                    kind="unsettled",
                    item=f"the unreported action tracking_id={tracking_id}",
                    reason=f"{type(exc).__name__}: {exc}",
                )
                report.set_aside[tracking_id] = str(exc)
                continue
            report.failed[tracking_id] = reason
            report.unreported.append(tracking_id)
    if rows or stale:
        logger.info(
            "verification: %d verified, %d failed (%d unreported), %d late, %d set aside",
            len(report.verified),
            len(report.failed),
            len(report.unreported),
            len(report.late),
            len(report.set_aside),
        )
    return report


def set_aside_results() -> dict[str, int]:
    """How many reported results are late and how many were set aside unsettled (metrics)."""
    late, unsettled = fetch_one(result_sql.COUNT_LATE_AND_SET_ASIDE, (SET_ASIDE,))
    return {"late": late, "set_aside": unsettled}


def action_state(tracking_id: str) -> dict[str, Any]:
    """An action's delivery and verification state (``kickoff actions show``, GET /v1/actions/{id})."""
    action = action_row(action_sql.SELECT_STATE, tracking_id)
    outbox = fetch_one(outbox_sql.LATEST_DELIVERY_OF_ACTION, (str(tracking_id),))
    result = fetch_one(result_sql.SELECT_RESULT, (_claim_key(str(tracking_id)),))
    keys = (
        "tracking_id",
        "league_id",
        "queue",
        "team",
        "status",
        "error",
        "created_at",
        "finished_at",
        "run_id",
    )
    out: dict[str, Any] = dict(zip(keys, action[: len(keys)], strict=True))
    creator_id, creator_name, traceparent = action[len(keys) :]
    out["created_by"] = None if creator_id is None else {"key_id": creator_id, "name": creator_name}
    out["trace_id"] = spans.trace_id_of(traceparent)  # the trace it was created in (None: untraced)
    out["delivery"] = (
        None
        if outbox is None
        else dict(
            zip(("message_id", "status", "published_at", "attempts", "last_error"), outbox, strict=True)
        )
    )
    if result is None:
        out["verification"] = {"status": "not reported"}
    else:
        try:
            body = json.loads(result[0])
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        out["verification"] = {
            "status": result[1],  # reported | verified | failed | set_aside
            "late": result[5],  # reported after the action was settled: kept here, the action unchanged
            "outcome": body.get("outcome"),
            "reported_by": body.get("reported_by"),
            "details": body.get("details"),
            "reason": result[2],
            "reported_at": result[3],
            "settled_at": None if result[1] == REPORTED else result[4],
        }
    return out

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
from config.errors import DatabaseUnavailable
from config.set_aside import set_aside
from models.activity import PENDING_STATUSES, ActionStatus
from models.audit import AuditContext
from models.boundary import transaction
from publisher.actions import record_result
from publisher.errors import ActionNotFound, TriggerConflictError, TriggerValidationError
from publisher.sql import actions as action_sql
from publisher.sql import outbox as outbox_sql
from publisher.sql import results as result_sql
from publisher.sql.results import ReportedResult, StoredResult

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
    audit: AuditContext | None = None,
) -> dict[str, Any]:
    """Record a consumer's result of one action (``reported``); a repeat before verification replaces it.

    A result for an action already settled (succeeded, failed, skipped) is recorded ``late``: it
    is kept and shown beside the action, which it never changes. A repeat of a result the
    verification set aside replaces it too (``reported`` again: the next pass settles it).
    ActionNotFound for an unknown tracking id; TriggerValidationError for an outcome other than
    succeeded or failed; TriggerConflictError once the result was settled (verified or failed).
    With ``audit``, the report is audited (action.result) before anything else.
    """
    if audit is not None:
        audit.record(
            "action.result",
            "action",
            str(tracking_id),
            after={"outcome": outcome, "reported_by": reported_by},
        )
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
        action = result_sql.action_of_result(tracking_id)
        if action is None:
            raise ActionNotFound(f"no activity action has tracking id {tracking_id}")
        late = action.status not in _PENDING
        key = _claim_key(str(tracking_id))
        saved = result_sql.save_report(
            claim_key=key,
            action=action,
            message_id=uuid.uuid5(_NAMESPACE, key),
            body=json.dumps(body),
            status=REPORTED,
            result=json.dumps(details or {}),
            late=late,
            now=now,
            traceparent=spans.current_traceparent(),  # the report's span: the verification continues it
            replaceable=[REPORTED, SET_ASIDE],
        )
        settled = None if saved else result_sql.result_status(key)
    if not saved:
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


def _settle(reported: ReportedResult, *, now: datetime, report: VerifyReport) -> None:
    """Settle one reported result (caller's savepoint): check it, then apply it unless it is late."""
    tracking_id = reported.tracking_id
    body = json.loads(reported.body)
    reason = _check(
        body["outcome"], body.get("details") or {}, team=reported.team, outbox_status=reported.delivery
    )
    late = reported.late or reported.action_status not in _PENDING
    if not late:
        try:
            if reason is None:
                record_result(tracking_id, ActionStatus.SUCCEEDED)
            else:
                record_result(tracking_id, ActionStatus.FAILED, error=reason)
        except TriggerConflictError:  # settled since the report (by hand, or another pass)
            late = True
    result_sql.settle(
        reported.row_id, status=VERIFIED if reason is None else REJECTED, reason=reason, late=late, now=now
    )
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
    result_sql.settle(row_id, status=SET_ASIDE, reason=reason, late=False, now=now)
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
        reported = result_sql.reported_for_update(status=REPORTED)
        for result in reported:
            try:  # the driver's errors translated per item: an outage is no item's fault
                with transaction(), _verification_span(result.tracking_id, result.traceparent):
                    _settle(result, now=now, report=report)
            except DatabaseUnavailable:
                raise
            except Exception as exc:  # one result never stops the pass
                _set_aside_result(result.row_id, result.tracking_id, exc, now=now, report=report)
        stale = action_sql.unreported_since(
            statuses=[ActionStatus.DELIVERED.value, ActionStatus.RUNNING.value],
            published_before=now - timedelta(seconds=result_timeout_seconds),
        )
        for tracking_id in stale:
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
    if reported or stale:
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
    counts = result_sql.count_late_and_set_aside(set_aside=SET_ASIDE)
    return {"late": counts.late, "set_aside": counts.set_aside}


def action_state(tracking_id: str) -> dict[str, Any]:
    """An action's delivery and verification state (``kickoff actions show``, GET /v1/actions/{id})."""
    action = action_sql.action_state(tracking_id)
    if action is None:
        raise ActionNotFound(f"no activity action has tracking id {tracking_id}")
    delivery = outbox_sql.latest_delivery_of_action(tracking_id)
    result = result_sql.stored_result(_claim_key(str(tracking_id)))
    out: dict[str, Any] = {
        "tracking_id": action.tracking_id,
        "league_id": action.league_id,
        "queue": action.queue,
        "team": action.team,
        "status": action.status,
        "error": action.error,
        "created_at": action.created_at,
        "finished_at": action.finished_at,
        "run_id": action.run_id,
    }
    creator = action.creator_key_id
    out["created_by"] = None if creator is None else {"key_id": creator, "name": action.creator_name}
    out["trace_id"] = spans.trace_id_of(action.traceparent)  # the trace it was created in (None: untraced)
    out["delivery"] = None if delivery is None else delivery._asdict()
    out["verification"] = {"status": "not reported"} if result is None else _verification(result)
    return out


def _verification(result: StoredResult) -> dict[str, Any]:
    """A stored result as ``action_state`` shows it."""
    try:
        body = json.loads(result.body)
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return {
        "status": result.status,  # reported | verified | failed | set_aside
        "late": result.late,  # reported after the action was settled: kept here, the action unchanged
        "outcome": body.get("outcome"),
        "reported_by": body.get("reported_by"),
        "details": body.get("details"),
        "reason": result.error,
        "reported_at": result.created_at,
        "settled_at": None if result.status == REPORTED else result.updated_at,
    }

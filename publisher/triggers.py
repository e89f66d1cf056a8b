"""Triggers: lineup, waiver claim and draft pick requests saved with their message and published at once.

Each trigger validates first (nothing is saved on a refusal), then saves the action and its
outbox row in one transaction under the idempotency guard, publishes immediately and returns
``queued`` or ``duplicate`` with the tracking id. A publish failure leaves the row to the drain.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from config.clock import ensure_utc, utcnow
from config.errors import DatabaseUnavailable, TriggerConflictError, TriggerUnavailableError
from config.settings import BaseEnvironment
from models.activity import ActionStatus
from models.db import database, database_errors
from publisher import validation as v
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.chain import check_parent
from publisher.idempotency import effective_key, key_is_released, release_ttl
from publisher.outbox import insert_row, publish_row_now
from publisher.queues import DRAFT_TARGETS, LINEUP_UPDATES, WAIVER_ACTIONS
from publisher.run_context import get_run_id
from publisher.trace import check_traceparent, trace_headers

logger = logging.getLogger(__name__)


class TriggerStatus(StrEnum):
    """The answer of a trigger."""

    QUEUED = "queued"  # a new action was saved (and published, unless the broker was down or it is held)
    DUPLICATE = "duplicate"  # the key belongs to an earlier action; its tracking id is returned


@dataclass(frozen=True)
class TriggerResult:
    """A trigger's answer: status, tracking id, and whether the broker already confirmed it."""

    status: TriggerStatus
    tracking_id: str
    published: bool = False
    held: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"status": self.status.value, "tracking_id": self.tracking_id}


@dataclass(frozen=True)
class LineupRequest:
    """POST /v1/trigger/lineup: swaps carry ESPN player ids; a swap ``kind`` of ``ir`` marks an IR move."""

    league_id: str
    team: str
    swaps: list[dict[str, Any]]
    idempotency_key: str | None = None
    decision_inputs: dict[str, Any] = field(default_factory=dict)
    traceparent: str | None = None


@dataclass(frozen=True)
class WaiverRequest:
    """POST /v1/trigger/waiver: an ESPN add (and drop); ``after_tracking_id`` chains it behind an IR move."""

    league_id: str
    team: str
    add_player_id: Any
    drop_player_id: Any = None
    bid: int | None = None
    after_tracking_id: str | None = None
    idempotency_key: str | None = None
    decision_inputs: dict[str, Any] = field(default_factory=dict)
    traceparent: str | None = None


@dataclass(frozen=True)
class DraftPickRequest:
    """POST /v1/trigger/draft-pick: the ESPN player to take at ``pick_number``, until ``expires_at``."""

    league_id: str
    team: str
    pick_number: int
    espn_id: Any
    expires_at: datetime | None = None
    idempotency_key: str | None = None
    decision_inputs: dict[str, Any] = field(default_factory=dict)
    traceparent: str | None = None


@dataclass(frozen=True)
class _Save:
    queue: str
    league_id: str
    team: str
    key: str | None
    decision_inputs: dict[str, Any]
    request: dict[str, Any]
    body: dict[str, Any]
    traceparent: str | None
    after_tracking_id: str | None = None
    hold_until: datetime | None = None
    held_by: str | None = None
    expires_at: datetime | None = None


def _insert_action(save: _Save, *, tracking_id: str, run_id: str | None, now: datetime) -> bool:
    cursor = database.execute_sql(
        "INSERT INTO activity_actions (tracking_id, league_id, kind, idempotency_key, team, status, request, "
        "decision_inputs, after_tracking_id, hold_until, run_id, traceparent, created_at, updated_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (league_id, kind, idempotency_key) DO NOTHING RETURNING id",
        (
            tracking_id,
            save.league_id,
            save.queue,
            save.key,
            save.team,
            ActionStatus.QUEUED.value,
            _json(save.request),
            _json(save.decision_inputs),
            save.after_tracking_id,
            save.hold_until,
            run_id,
            save.traceparent,
            now,
            now,
        ),
    )
    return cursor.fetchone() is not None


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


def _save_and_publish(
    save: _Save, *, publisher: AmqpPublisher, settings: BaseEnvironment, run_id: str | None
) -> tuple[TriggerResult, Exception | None]:
    """Save action + outbox row in one transaction (idempotency guard), then publish at once."""
    now = utcnow()
    tracking_id = str(uuid.uuid4())
    message_id = str(uuid.uuid4())
    body = {**save.body, "tracking_id": tracking_id}
    message = OutgoingMessage(
        queue=save.queue, body=body, message_id=message_id, headers=trace_headers(save.traceparent)
    )
    ttl = release_ttl(save.queue, settings)
    with database_errors(), database.atomic():
        while not _insert_action(save, tracking_id=tracking_id, run_id=run_id, now=now):
            existing = database.execute_sql(
                "SELECT tracking_id, status, created_at FROM activity_actions "
                "WHERE league_id = %s AND kind = %s AND idempotency_key = %s FOR UPDATE",
                (save.league_id, save.queue, save.key),
            ).fetchone()
            if existing is None:
                continue  # released by someone else meanwhile: try again
            old_id, status, created_at = str(existing[0]), existing[1], existing[2]
            if not key_is_released(status=status, created_at=created_at, ttl=ttl, now=now):
                logger.info("duplicate trigger: tracking_id=%s queue=%s key=%s", old_id, save.queue, save.key)
                return TriggerResult(TriggerStatus.DUPLICATE, old_id), None
            database.execute_sql(
                "UPDATE activity_actions SET released_key = idempotency_key, idempotency_key = NULL, "
                "updated_at = %s WHERE tracking_id = %s",
                (now, old_id),
            )
            logger.info("idempotency key released: tracking_id=%s key=%s", old_id, save.key)
        grace = timedelta(seconds=settings.outbox_immediate_grace_seconds)
        outbox_id = insert_row(
            message=message,
            tracking_id=tracking_id,
            next_attempt_at=now + grace,
            held_by=save.held_by,
            expires_at=save.expires_at,
        )
    logger.info(
        "trigger saved: tracking_id=%s queue=%s run_id=%s held_by=%s",
        tracking_id,
        save.queue,
        run_id,
        save.held_by,
    )
    if save.held_by is not None:
        return TriggerResult(TriggerStatus.QUEUED, tracking_id, held=True), None
    try:
        outcome = publish_row_now(outbox_id, publisher=publisher, settings=settings)
    except DatabaseUnavailable as exc:  # the row is saved; the drain publishes it
        logger.warning("immediate publish skipped: tracking_id=%s: %s", tracking_id, exc)
        return TriggerResult(TriggerStatus.QUEUED, tracking_id), exc
    error = None if outcome is None else outcome.error
    published = outcome is not None and outcome.confirmed
    return TriggerResult(TriggerStatus.QUEUED, tracking_id, published=published), error


def _run_id(run_id: str | None) -> str | None:
    return run_id if run_id is not None else get_run_id()


def trigger_lineup(
    request: LineupRequest, *, publisher: AmqpPublisher, settings: BaseEnvironment, run_id: str | None = None
) -> TriggerResult:
    """Queue a lineup change (lineup_updates); swap kinds and decision_inputs are not published."""
    league_id = v.text(request.league_id, "league_id")
    team = v.text(request.team, "team")
    swaps = v.swaps(request.swaps)
    inputs = v.decision_inputs(request.decision_inputs)
    traceparent = check_traceparent(request.traceparent)
    body = {
        "league_id": league_id,
        "team_id": team,
        "swaps": [v.published_swap(s) for s in swaps],
        "traceparent": traceparent,
        "created_at": utcnow().isoformat(),
    }
    save = _Save(
        queue=LINEUP_UPDATES,
        league_id=league_id,
        team=team,
        key=effective_key(request.idempotency_key, inputs),
        decision_inputs=inputs,
        request={"swaps": swaps},
        body=body,
        traceparent=traceparent,
    )
    result, _ = _save_and_publish(save, publisher=publisher, settings=settings, run_id=_run_id(run_id))
    return result


def trigger_waiver(
    request: WaiverRequest, *, publisher: AmqpPublisher, settings: BaseEnvironment, run_id: str | None = None
) -> TriggerResult:
    """Queue a waiver claim (waiver_actions), optionally chained behind an IR move.

    A chained claim (``after_tracking_id``) must omit drop_player_id; its parent must exist,
    belong to the same team, contain an ir entry and not be failed. It is held until the parent
    succeeds, for at most ACTIVITY_DEPENDENCY_HOLD_SECONDS. An unreadable parent is a retryable
    TriggerUnavailableError and nothing is queued.
    """
    league_id = v.text(request.league_id, "league_id")
    team = v.text(request.team, "team")
    add = v.espn_id(request.add_player_id, "add_player_id")
    drop = None if request.drop_player_id is None else v.espn_id(request.drop_player_id, "drop_player_id")
    if request.bid is not None and (isinstance(request.bid, bool) or not isinstance(request.bid, int)):
        raise v.TriggerValidationError("bid", f"must be an integer, got {request.bid!r}")
    after = v.optional_uuid(request.after_tracking_id, "after_tracking_id")
    inputs = v.decision_inputs(request.decision_inputs)
    traceparent = check_traceparent(request.traceparent)
    now = utcnow()
    held_by = hold_until = None
    if after is not None:
        if drop is not None:
            raise v.TriggerValidationError("drop_player_id", "must be omitted when after_tracking_id is set")
        parent_status = check_parent(after, league_id=league_id, team=team, settings=settings)
        if parent_status != ActionStatus.SUCCEEDED:
            held_by = after
            hold_until = now + timedelta(seconds=settings.activity_dependency_hold_seconds)
    body = {
        "league_id": league_id,
        "team_id": team,
        "add_player_id": add,
        "drop_player_id": drop,
        "bid": request.bid,
        "traceparent": traceparent,
        "created_at": now.isoformat(),
    }
    save = _Save(
        queue=WAIVER_ACTIONS,
        league_id=league_id,
        team=team,
        key=effective_key(request.idempotency_key, inputs),
        decision_inputs=inputs,
        request={"add_player_id": add, "drop_player_id": drop, "bid": request.bid},
        body=body,
        traceparent=traceparent,
        after_tracking_id=after,
        hold_until=hold_until,
        held_by=held_by,
    )
    result, _ = _save_and_publish(save, publisher=publisher, settings=settings, run_id=_run_id(run_id))
    return result


def _pick_filled(league_id: str, pick_number: int) -> bool:
    with database_errors():
        row = database.execute_sql(
            "SELECT 1 FROM activity_actions WHERE league_id = %s AND kind = %s AND status = %s "
            "AND (request->>'pick_number')::int = %s LIMIT 1",
            (league_id, DRAFT_TARGETS, ActionStatus.SUCCEEDED.value, pick_number),
        ).fetchone()
    return row is not None


def trigger_draft_pick(
    request: DraftPickRequest,
    *,
    publisher: AmqpPublisher,
    settings: BaseEnvironment,
    run_id: str | None = None,
) -> TriggerResult:
    """Queue a draft target (draft_targets) that expires with its pick.

    A filled or expired pick is a TriggerConflictError (409). A failed delivery is a retryable
    TriggerUnavailableError (503) carrying the tracking id: the row is saved, a retry with the
    same key returns ``duplicate`` and the drain delivers it unless the pick expires first.
    """
    league_id = v.text(request.league_id, "league_id")
    team = v.text(request.team, "team")
    pick = v.positive_int(request.pick_number, "pick_number")
    espn = v.espn_id(request.espn_id, "espn_id")
    inputs = v.decision_inputs(request.decision_inputs)
    traceparent = check_traceparent(request.traceparent)
    now = utcnow()
    expires_at = None
    if request.expires_at is not None:
        try:
            expires_at = ensure_utc(request.expires_at, what="expires_at")
        except ValueError as exc:
            raise v.TriggerValidationError("expires_at", str(exc)) from exc
        if expires_at <= now:
            raise TriggerConflictError(
                f"pick {pick} in league {league_id} expired at {expires_at.isoformat()}"
            )
    if _pick_filled(league_id, pick):
        raise TriggerConflictError(f"pick {pick} in league {league_id} is already filled")
    body = {
        "league_id": league_id,
        "team_id": team,
        "pick_number": pick,
        "espn_id": espn,
        "expires_at": None if expires_at is None else expires_at.isoformat(),
        "traceparent": traceparent,
        "created_at": now.isoformat(),
    }
    save = _Save(
        queue=DRAFT_TARGETS,
        league_id=league_id,
        team=team,
        key=effective_key(request.idempotency_key, inputs),
        decision_inputs=inputs,
        request={"pick_number": pick, "espn_id": espn},
        body=body,
        traceparent=traceparent,
        expires_at=expires_at,
    )
    result, error = _save_and_publish(save, publisher=publisher, settings=settings, run_id=_run_id(run_id))
    if result.status is TriggerStatus.QUEUED and error is not None:
        raise TriggerUnavailableError(
            f"draft target {result.tracking_id} saved but not delivered ({error}); retry with the same key",
            tracking_id=result.tracking_id,
        ) from error
    return result


__all__ = [
    "DraftPickRequest",
    "LineupRequest",
    "TriggerResult",
    "TriggerStatus",
    "WaiverRequest",
    "trigger_draft_pick",
    "trigger_lineup",
    "trigger_waiver",
]

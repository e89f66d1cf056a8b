"""Triggers: lineup, waiver claim and draft pick requests saved with their message and published at once.

Each trigger validates first (nothing is saved on a refusal), then saves the action and its
outbox row in one transaction under the idempotency guard, publishes immediately and answers
``queued`` (the broker confirmed it), ``pending`` (saved; the drain publishes it) or
``duplicate`` with the tracking id. A draft target that could not be delivered is a retryable
TriggerUnavailableError, and a retry with its key tries the delivery again at once.
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
from config.records import json_fields
from config.settings import BaseEnvironment
from models.activity import ActionStatus
from models.db import database, database_errors
from models.outbox import OutboxStatus
from publisher import validation as v
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.chain import check_parent
from publisher.idempotency import effective_key, key_is_released, release_ttl
from publisher.outbox import insert_row, publish_row_now
from publisher.players import refuse_sleeper_ids
from publisher.queues import DRAFT_TARGETS, LINEUP_UPDATES, WAIVER_ACTIONS
from publisher.run_context import get_run_id
from publisher.sql import actions as action_sql
from publisher.sql import outbox as outbox_sql
from publisher.trace import check_traceparent, trace_headers

logger = logging.getLogger(__name__)


class TriggerStatus(StrEnum):
    """The answer of a trigger."""

    QUEUED = "queued"  # a new action was saved and the broker confirmed its message
    PENDING = "pending"  # a new action and its message were saved; the drain publishes it (or it is held)
    DUPLICATE = "duplicate"  # the key belongs to an earlier action; its tracking id is returned


@dataclass(frozen=True)
class TriggerResult:
    """A trigger's answer: status, tracking id, whether the broker confirmed the message, held."""

    status: TriggerStatus
    tracking_id: str
    published: bool = False
    held: bool = False

    as_json = json_fields


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
        action_sql.INSERT,
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


@dataclass(frozen=True)
class _Delivery:
    """The outbox row of an earlier action, as a duplicate request sees it."""

    outbox_id: int | None = None
    status: str | None = None
    held: bool = False
    expires_at: datetime | None = None


def _existing_delivery(tracking_id: str) -> _Delivery:
    """The outbox row of an action's message (caller's transaction)."""
    row = database.execute_sql(
        outbox_sql.SELECT_FIRST_OF_ACTION,
        (tracking_id,),
    ).fetchone()
    return _Delivery() if row is None else _Delivery(row[0], row[1], row[2], row[3])


def _save_and_publish(
    save: _Save,
    *,
    publisher: AmqpPublisher,
    settings: BaseEnvironment,
    run_id: str | None,
    redeliver_duplicate: bool = False,
) -> tuple[TriggerResult, Exception | str | None]:
    """Save action + outbox row in one transaction (idempotency guard), then publish at once.

    Returns the answer and, when the message was not confirmed, why (the error or a reason).

    With ``redeliver_duplicate`` a duplicate whose message is still pending is published again
    at once (the draft pick's retry): the answer is then that delivery's, not ``duplicate``.
    """
    now = utcnow()
    tracking_id = str(uuid.uuid4())
    message_id = str(uuid.uuid4())
    body = {**save.body, "tracking_id": tracking_id}
    message = OutgoingMessage(
        queue=save.queue, body=body, message_id=message_id, headers=trace_headers(save.traceparent)
    )
    ttl = release_ttl(save.queue, settings)
    duplicate: TriggerResult | None = None
    pending_outbox_id: int | None = None
    with database_errors(), database.atomic():
        while not _insert_action(save, tracking_id=tracking_id, run_id=run_id, now=now):
            existing = database.execute_sql(
                action_sql.SELECT_BY_KEY_FOR_UPDATE,
                (save.league_id, save.queue, save.key),
            ).fetchone()
            if existing is None:
                continue  # released by someone else meanwhile: try again
            old_id, status, created_at = str(existing[0]), existing[1], existing[2]
            if not key_is_released(status=status, created_at=created_at, ttl=ttl, now=now):
                delivery = _existing_delivery(old_id)
                published = delivery.status == OutboxStatus.PUBLISHED.value
                logger.info(
                    "duplicate trigger: tracking_id=%s queue=%s key=%s published=%s",
                    old_id,
                    save.queue,
                    save.key,
                    published,
                )
                duplicate = TriggerResult(
                    TriggerStatus.DUPLICATE, old_id, published=published, held=delivery.held
                )
                if delivery.status == OutboxStatus.PENDING.value and not delivery.held:
                    if redeliver_duplicate and delivery.expires_at is not None and delivery.expires_at <= now:
                        raise TriggerConflictError(
                            f"the earlier request {old_id} with this key expired at "
                            f"{delivery.expires_at.isoformat()} before it was delivered"
                        )
                    pending_outbox_id = delivery.outbox_id
                break
            database.execute_sql(
                action_sql.RELEASE_KEY,
                (now, old_id),
            )
            logger.info("idempotency key released: tracking_id=%s key=%s", old_id, save.key)
        if duplicate is None:
            grace = timedelta(seconds=settings.outbox_immediate_grace_seconds)
            pending_outbox_id = insert_row(
                message=message,
                tracking_id=tracking_id,
                next_attempt_at=now + grace,
                held_by=save.held_by,
                expires_at=save.expires_at,
            )
    if duplicate is not None:
        if not (redeliver_duplicate and pending_outbox_id is not None):
            return duplicate, None
        tracking_id = duplicate.tracking_id
        logger.info("retry of an undelivered request: publishing tracking_id=%s again", tracking_id)
    else:
        logger.info(
            "trigger saved: tracking_id=%s queue=%s run_id=%s held_by=%s",
            tracking_id,
            save.queue,
            run_id,
            save.held_by,
        )
        if save.held_by is not None:
            return TriggerResult(TriggerStatus.PENDING, tracking_id, held=True), None
    assert pending_outbox_id is not None
    try:
        outcome = publish_row_now(pending_outbox_id, publisher=publisher, settings=settings)
    except DatabaseUnavailable as exc:  # the row is saved; the drain publishes it
        logger.warning("immediate publish skipped: tracking_id=%s: %s", tracking_id, exc)
        return TriggerResult(TriggerStatus.PENDING, tracking_id), exc
    if outcome is None:  # a drain holds the row right now, or it was just published
        published = _row_published(pending_outbox_id)
        busy = None if published else "a drain is publishing it right now"
        status = TriggerStatus.QUEUED if published else TriggerStatus.PENDING
        return TriggerResult(status, tracking_id, published=published), busy
    if outcome.confirmed:
        return TriggerResult(TriggerStatus.QUEUED, tracking_id, published=True), None
    return TriggerResult(TriggerStatus.PENDING, tracking_id), outcome.error


def _row_published(outbox_id: int) -> bool:
    with database_errors():
        row = database.execute_sql(outbox_sql.SELECT_STATUS, (outbox_id,)).fetchone()
    return row is not None and row[0] == OutboxStatus.PUBLISHED.value


def _run_id(run_id: str | None) -> str | None:
    return run_id if run_id is not None else get_run_id()


def trigger_lineup(
    request: LineupRequest, *, publisher: AmqpPublisher, settings: BaseEnvironment, run_id: str | None = None
) -> TriggerResult:
    """Queue a lineup change (lineup_updates); swap kinds and decision_inputs are not published."""
    league_id = v.text(request.league_id, "league_id")
    team = v.text(request.team, "team")
    swaps = v.swaps(request.swaps)
    refuse_sleeper_ids({f"swaps[{i}].player_id": s["player_id"] for i, s in enumerate(swaps)})
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
    refuse_sleeper_ids({"add_player_id": add, "drop_player_id": drop})
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
            action_sql.PICK_TAKEN,
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

    A target always expires: without ``expires_at`` it gets now + DRAFT_TARGET_DEFAULT_EXPIRY_SECONDS.
    A filled or expired pick is a TriggerConflictError (409). The answer is ``queued`` only
    when the broker confirmed the target; otherwise it is a retryable TriggerUnavailableError
    (503) carrying the tracking id (the target stays saved and the drain delivers it unless the
    pick expires first). A retry with the same key publishes the saved target again at once and
    answers ``queued`` when it goes through (``duplicate`` only for a target already delivered).
    """
    league_id = v.text(request.league_id, "league_id")
    team = v.text(request.team, "team")
    pick = v.positive_int(request.pick_number, "pick_number")
    espn = v.espn_id(request.espn_id, "espn_id")
    refuse_sleeper_ids({"espn_id": espn})
    inputs = v.decision_inputs(request.decision_inputs)
    traceparent = check_traceparent(request.traceparent)
    now = utcnow()
    if request.expires_at is None:
        expires_at = now + timedelta(seconds=settings.draft_target_default_expiry_seconds)
    else:
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
        "expires_at": expires_at.isoformat(),
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
    result, error = _save_and_publish(
        save, publisher=publisher, settings=settings, run_id=_run_id(run_id), redeliver_duplicate=True
    )
    if result.published:
        if result.status is TriggerStatus.DUPLICATE:
            return result
        return TriggerResult(TriggerStatus.QUEUED, result.tracking_id, published=True)
    reason = error or "its message is not pending any more"
    raise TriggerUnavailableError(
        f"draft target {result.tracking_id} saved but not delivered ({reason}); retry with the same key",
        tracking_id=result.tracking_id,
    ) from (error if isinstance(error, BaseException) else None)


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

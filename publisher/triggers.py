"""Triggers: lineup, waiver claim and draft pick requests saved with their message and published at once.

Each trigger queue is declared in ``publisher.trigger_queues``; ``send`` is the one path for every
queue: a queue with rules of its own names its save builder in its declaration (``save``: the
builders of the three queues are here), a queue without one is validated by its request model and
sent as its own fields (``_fields_save``); a queue declared ``must_deliver`` answers only once
delivered. ``trigger_lineup``, ``trigger_waiver`` and ``trigger_draft_pick`` are conveniences:
``send`` bound to their queue (``sender_of``); a new queue needs no function of its own.

Each trigger validates first (nothing is saved on a refusal), then saves the action and its
outbox row in one transaction under the idempotency guard, publishes immediately and answers
``queued`` (the broker confirmed it), ``pending`` (saved; the drain publishes it) or
``duplicate`` with the tracking id. A draft target that could not be delivered is a retryable
TriggerUnavailableError, and a retry with its key tries the delivery again at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from config import spans
from config.clock import ensure_utc, utcnow
from config.errors import KickoffError
from config.settings import KickoffSettings
from models import history_recorder as history
from models.activity import ActionStatus
from models.audit import AuditContext
from models.audit_acts import TRIGGER_ROUTE_ACTION
from publisher import validation as v
from publisher.amqp import AmqpPublisher
from publisher.chain import check_parent
from publisher.errors import DeadDeliveryError, TriggerConflictError, TriggerUnavailableError
from publisher.idempotency import effective_key, key_is_released
from publisher.run_context import get_run_id
from publisher.sql import actions as action_sql
from publisher.sql import outbox as outbox_sql
from publisher.trace import check_traceparent
from publisher.trigger_queues import DRAFT_PICK, LINEUP, WAIVER, TriggerQueue, release_ttl
from publisher.trigger_requests import DraftPickRequest, LineupRequest, TriggerRequest, WaiverRequest
from publisher.trigger_saves import (
    Committer,
    SaveOutcome,
    TriggerCommitter,
    TriggerResult,
    TriggerSave,
    TriggerStatus,
    outcome_of,
    save_and_publish,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Common:
    """A request's checked common fields and its stored idempotency key."""

    league_id: str
    team: str
    key: str | None
    inputs: dict[str, Any]
    traceparent: str | None
    created_by_key_id: str | None = None
    run_id: str | None = None  # None: the run scope's (publisher.run_context)

    @classmethod
    def check(
        cls, request: TriggerRequest, created_by_key_id: str | None = None, run_id: str | None = None
    ) -> _Common:
        inputs = v.decision_inputs(request.value("decision_inputs"))
        return cls(
            league_id=v.text(request.league_id, "league_id"),
            team=v.text(request.team_id, "team_id"),
            key=effective_key(v.storable_text(request.idempotency_key, "idempotency_key"), inputs),
            inputs=inputs,
            traceparent=check_traceparent(request.traceparent),
            created_by_key_id=created_by_key_id,
            run_id=run_id,
        )

    def save(
        self,
        *,
        queue: str,
        published: dict[str, Any],
        stored: dict[str, Any],
        espn_ids: dict[str, int | None],
        now: datetime,
        **extra: Any,
    ) -> TriggerSave:
        """The save: ``published`` goes into the message body between the team and the traceparent,
        ``stored`` into the action's request column."""
        body = {
            "league_id": self.league_id,
            "team_id": self.team,
            **published,
            "traceparent": self.traceparent,
            "created_at": now.isoformat(),
        }
        return TriggerSave(
            queue=queue,
            league_id=self.league_id,
            team=self.team,
            key=self.key,
            decision_inputs=self.inputs,
            request=stored,
            body=body,
            # the action's and its outbox row's context: the trigger's span while tracing, else the caller's
            traceparent=spans.current_traceparent() or self.traceparent,
            espn_ids=espn_ids,
            run_id=self.run_id if self.run_id is not None else get_run_id(),
            created_by_key_id=self.created_by_key_id,
            **extra,
        )


def _send(
    save: TriggerSave,
    *,
    publisher: AmqpPublisher,
    settings: KickoffSettings,
    committer: Committer | None,
) -> SaveOutcome:
    """Save and publish one trigger: with the process's committer (together with concurrent ones) or alone."""
    if committer is not None:
        return committer.submit(save, publisher=publisher)
    return outcome_of(save_and_publish([save], publisher=publisher, settings=settings)[0])


#: Builds one queue's save from its request and checked common fields (``_Common.save``).
SaveBuilder = Callable[[TriggerQueue, Any, _Common, KickoffSettings], TriggerSave]


def lineup_save(
    queue: TriggerQueue, request: LineupRequest, common: _Common, settings: KickoffSettings
) -> TriggerSave:
    """A lineup change (lineup_updates); swap kinds and decision_inputs are not published."""
    swaps = v.swaps(request.value("swaps"))
    return common.save(
        queue=queue.name,
        published={"swaps": [v.published_swap(s) for s in swaps]},
        stored={"swaps": swaps},
        espn_ids={f"swaps[{i}].player_id": s["player_id"] for i, s in enumerate(swaps)},
        now=utcnow(),
    )


def waiver_save(
    queue: TriggerQueue, request: WaiverRequest, common: _Common, settings: KickoffSettings
) -> TriggerSave:
    """A waiver claim (waiver_actions), optionally chained behind an IR move.

    A chained claim (``after_tracking_id``) must omit drop_player_id; its parent must exist,
    belong to the same team, contain an ir entry and not be failed. It is held until the parent
    succeeds, for at most ACTIVITY_DEPENDENCY_HOLD_SECONDS. An unreadable parent is a retryable
    TriggerUnavailableError and nothing is queued.
    """
    add = v.espn_id(request.add_player_id, "add_player_id")
    drop = None if request.drop_player_id is None else v.espn_id(request.drop_player_id, "drop_player_id")
    if request.bid is not None and (isinstance(request.bid, bool) or not isinstance(request.bid, int)):
        raise v.TriggerValidationError("bid", f"must be an integer, got {request.bid!r}")
    after = v.optional_uuid(request.after_tracking_id, "after_tracking_id")
    now = utcnow()
    held_by = hold_until = None
    if after is not None:
        if drop is not None:
            raise v.TriggerValidationError("drop_player_id", "must be omitted when after_tracking_id is set")
        parent_status = check_parent(after, league_id=common.league_id, team=common.team, settings=settings)
        if parent_status != ActionStatus.SUCCEEDED:
            held_by = after
            hold_until = now + timedelta(seconds=settings.activity_dependency_hold_seconds)
    fields = {"add_player_id": add, "drop_player_id": drop, "bid": request.bid}
    return common.save(
        queue=queue.name,
        published=fields,
        stored=fields,
        espn_ids={"add_player_id": add, "drop_player_id": drop},
        now=now,
        after_tracking_id=after,
        hold_until=hold_until,
        held_by=held_by,
    )


def _pick_filled(queue: TriggerQueue, league_id: str, pick_number: int) -> bool:
    return action_sql.pick_taken(
        league_id=league_id, kind=queue.name, pick_number=pick_number, status=ActionStatus.SUCCEEDED.value
    )


def _key_held(queue: TriggerQueue, common: _Common, settings: KickoffSettings, now: datetime) -> bool:
    """Whether the request's key belongs to an earlier action that still holds it (pending or in its TTL)."""
    if common.key is None:
        return False
    holder = action_sql.key_holder(league_id=common.league_id, kind=queue.name, key=common.key)
    if holder is None:
        return False
    return not key_is_released(
        status=holder.status, created_at=holder.created_at, ttl=release_ttl(queue.name, settings), now=now
    )


def draft_pick_save(
    queue: TriggerQueue, request: DraftPickRequest, common: _Common, settings: KickoffSettings
) -> TriggerSave:
    """A draft target (draft_targets) that expires with its pick.

    A target always expires: without ``expires_at`` it gets now + DRAFT_TARGET_DEFAULT_EXPIRY_SECONDS.
    A filled or expired pick is a TriggerConflictError (409), except for a repeat of a key an
    earlier target still holds: the key lookup comes first, so a same-key repeat after its own
    target filled the pick (or after ``expires_at``) answers ``duplicate`` with the original
    tracking id. The answer is ``queued`` only
    when the broker confirmed the target; otherwise it is a retryable TriggerUnavailableError
    (503) carrying the tracking id (the target stays saved and the drain delivers it unless the
    pick expires first). A retry with the same key publishes the saved target again at once and
    answers ``queued`` when it goes through (``duplicate`` only for a target already delivered).
    A target whose message is dead (the broker refused it to the last attempt) is a
    DeadDeliveryError (409) naming how to revive it: ``kickoff outbox retry-dead`` or a new key.
    """
    pick = v.positive_int(request.pick_number, "pick_number")
    espn = v.espn_id(request.espn_id, "espn_id")
    now = utcnow()
    if request.expires_at is None:
        expires_at = now + timedelta(seconds=settings.draft_target_default_expiry_seconds)
    else:
        try:
            expires_at = ensure_utc(request.expires_at, what="expires_at")
        except ValueError as exc:
            raise v.TriggerValidationError("expires_at", str(exc)) from exc
    if not _key_held(queue, common, settings, now):  # a repeat is answered by its key (the save)
        if expires_at <= now:
            raise TriggerConflictError(
                f"pick {pick} in league {common.league_id} expired at {expires_at.isoformat()}"
            )
        if _pick_filled(queue, common.league_id, pick):
            raise TriggerConflictError(f"pick {pick} in league {common.league_id} is already filled")
    return common.save(
        queue=queue.name,
        published={"pick_number": pick, "espn_id": espn, "expires_at": expires_at.isoformat()},
        stored={"pick_number": pick, "espn_id": espn},
        espn_ids={"espn_id": espn},
        now=now,
        expires_at=expires_at,
        redeliver_duplicate=True,
    )


def _fields_save(
    queue: TriggerQueue, request: TriggerRequest, common: _Common, settings: KickoffSettings
) -> TriggerSave:
    """A queue without a builder of its own: the request's own fields (JSON) are the message between
    the team and the traceparent and the action's request."""
    fields = request.model_dump(mode="json", include=set(request.own_fields()))
    return common.save(queue=queue.name, published=fields, stored=fields, espn_ids={}, now=utcnow())


def _refuse_if_dead(tracking_id: str) -> None:
    """DeadDeliveryError (409) when the target's message is dead: no retry with its key can deliver it."""
    dead = outbox_sql.dead_delivery_of_action(tracking_id)
    if dead is None:
        return
    raise DeadDeliveryError(
        f"draft target {tracking_id} is dead: the broker refused its message to the last attempt "
        f"({dead.last_error or 'no error recorded'}), so a retry with this key cannot deliver it; after "
        f"fixing the cause revive it with `kickoff outbox retry-dead {dead.outbox_id}`, or send the pick "
        "with a new idempotency key",
        tracking_id=tracking_id,
    )


def _require_delivered(result: TriggerResult, error: object) -> None:
    """A ``must_deliver`` queue's trigger (the draft target) answers ``queued`` only once delivered:
    otherwise dead (409) or unavailable (503)."""
    if result.published:  # queued now, or a duplicate of a target already delivered
        return
    _refuse_if_dead(result.tracking_id)
    reason = error or "its message is not pending any more"
    raise TriggerUnavailableError(
        f"draft target {result.tracking_id} saved but not delivered ({reason}); retry with the same key",
        tracking_id=result.tracking_id,
    ) from (error if isinstance(error, BaseException) else None)


def send(
    queue: TriggerQueue,
    request: TriggerRequest,
    *,
    publisher: AmqpPublisher,
    settings: KickoffSettings,
    run_id: str | None = None,
    committer: Committer | None = None,
    created_by_key_id: str | None = None,
    in_span: spans.Span | None = None,
    audit: AuditContext | None = None,
) -> TriggerResult:
    """Send ``request`` to trigger queue ``queue`` (the API's, the CLI's and every trigger function's path).

    The queue's own builder checks the request's fields; a queue without one validates the request
    with its model first (``_fields_save``). A ``must_deliver`` queue's trigger raises unless delivered.
    While tracing is on it runs in a ``<queue> trigger`` span: a child of the current span, else of the
    request's ``traceparent``; or, given ``in_span`` (a trigger route: its request's server span), in
    that span, which takes the trigger's attributes. Its action and outbox row keep that span's context.
    The immediate publish makes no span of its own: the trigger's span records it (``kickoff.status``
    ``queued`` is the broker's confirm; a ``publish failed`` event says why not), and the message's
    ``traceparent`` header names that span. A row published later by the drain gets the drain's span.
    With ``audit``, the request is audited (trigger.send, its queue the target) before anything else:
    an entry that cannot be written refuses it.
    """
    if audit is not None:
        after = {k: getattr(request, k, None) for k in ("league_id", "idempotency_key")}
        audit.record(TRIGGER_ROUTE_ACTION, "queue", queue.name, after=after)
    build: SaveBuilder | None = queue.save_builder()
    parent = None if in_span is not None or spans.current_ids() else getattr(request, "traceparent", None)
    with spans.span_or_within(in_span, f"{queue.name} trigger", parent=parent) as span:
        try:
            if build is None:
                request = request.checked()
                build = _fields_save
            common = _Common.check(request, created_by_key_id, run_id)
            save = build(queue, request, common, settings)
            result, error = _send(save, publisher=publisher, settings=settings, committer=committer)
            if span is not None and span.is_recording():  # at once, as it is known (one call per trigger)
                span.set_attributes(
                    {
                        "kickoff.queue": queue.name,
                        "kickoff.tracking_id": result.tracking_id,
                        "kickoff.status": result.status,
                    }
                )
                if error is not None:  # saved, not published now (the drain's publish span follows)
                    span.add_event("publish failed", {"error": str(error)[:500]})
            if queue.must_deliver:
                _require_delivered(result, error)
        except KickoffError as exc:
            history.count("triggers", f"{queue.name} {_refusal(exc)}")
            raise
    history.count("triggers", f"{queue.name} {result.status}")
    return result


def _refusal(exc: KickoffError) -> str:
    """How a refused trigger's answer is counted in the history: invalid, conflict or unavailable."""
    if isinstance(exc, ValueError):
        return "invalid"
    if isinstance(exc, TriggerConflictError):
        return "conflict"
    return "unavailable"


#: A trigger function: sends one request of its queue and answers its result (``send``'s keywords).
Sender = Callable[..., TriggerResult]


def sender_of(queue: TriggerQueue) -> Sender:
    """The trigger function of ``queue``: ``send`` bound to it (its rules: the queue's save builder)."""

    def send_to_queue(request: TriggerRequest, **kw: Any) -> TriggerResult:
        return send(queue, request, **kw)

    send_to_queue.__name__ = send_to_queue.__qualname__ = f"trigger_{queue.command.replace('-', '_')}"
    send_to_queue.__doc__ = f"{queue.summary} ``send`` to {queue.name}: takes its keywords."
    return send_to_queue


trigger_lineup = sender_of(LINEUP)
trigger_waiver = sender_of(WAIVER)
trigger_draft_pick = sender_of(DRAFT_PICK)


__all__ = [
    "DraftPickRequest",
    "LineupRequest",
    "TriggerCommitter",
    "TriggerRequest",
    "TriggerResult",
    "TriggerStatus",
    "WaiverRequest",
    "send",
    "sender_of",
    "trigger_draft_pick",
    "trigger_lineup",
    "trigger_waiver",
]

"""Saving triggers: the action and its outbox row in one transaction, then the publish, many at a time.

``save_and_publish`` takes a batch of validated saves (one for a library call, every trigger that
arrived meanwhile under ``TriggerCommitter``) and:

1. in one transaction, refuses the saves that name a Sleeper id where an ESPN id belongs (one
   query for all), inserts every other action with ``ON CONFLICT DO NOTHING`` and the outbox
   rows of those inserted (saves in key order, so two batches that share keys never deadlock);
   a batch the database refuses as a whole is saved again one save at a time, so one bad save
   fails alone;
2. settles each save whose key was held (``_settle_held_key``: the duplicate, key-release and
   redelivery rules, one transaction each);
3. claims the new rows that are not held and the redelivered ones, publishes them with one wait
   for all confirms and records the broker's answers, in a second transaction.

A row is published only from that claim (``FOR UPDATE SKIP LOCKED``), so a drain that got there
first is never doubled; its immediate-publish grace keeps the drain away meanwhile.

``TriggerGroup`` saves several triggers in the caller's one transaction and publishes them after
it committed (rumor-action's moves: all or none).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from config.clock import utcnow
from config.errors import DatabaseRefused, DatabaseUnavailable
from config.records import json_fields
from config.settings import KickoffSettings
from models.activity import ActionStatus
from models.boundary import transaction
from models.outbox import OutboxStatus
from publisher.amqp import AmqpPublisher, OutgoingMessage, PublishOutcome
from publisher.errors import TriggerConflictError, TriggerValidationError
from publisher.idempotency import key_is_released
from publisher.outbox import insert_row, publish_rows_now
from publisher.sleeper_ids import sleeper_id_refusal, sleeper_only_ids
from publisher.sql import actions as action_sql
from publisher.sql import outbox as outbox_sql
from publisher.trace import trace_headers
from publisher.trigger_queues import release_ttl

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


#: A save's answer and, when its message was not confirmed, why (the error or a reason).
SaveOutcome = tuple[TriggerResult, Exception | str | None]


def outcome_of(answer: SaveOutcome | Exception) -> SaveOutcome:
    """A save's outcome from ``save_and_publish``'s answer for it: its error is raised."""
    if isinstance(answer, Exception):
        raise answer
    return answer


@dataclass(frozen=True)
class TriggerSave:
    """A validated trigger, ready to save: its action's columns, its message body, its ESPN ids.

    ``espn_ids`` (field name -> id) are checked against the players map in the saving
    transaction: an id known only as a Sleeper id refuses the save (TriggerValidationError).

    With ``redeliver_duplicate`` a duplicate whose message is still pending is published again
    at once (the draft pick's retry): the answer is then that delivery's, not ``duplicate``.
    """

    queue: str
    league_id: str
    team: str
    key: str | None
    decision_inputs: dict[str, Any]
    request: dict[str, Any]
    body: dict[str, Any]
    traceparent: str | None
    espn_ids: dict[str, int | None] = field(default_factory=dict)
    run_id: str | None = None
    after_tracking_id: str | None = None
    hold_until: datetime | None = None
    held_by: str | None = None
    expires_at: datetime | None = None
    redeliver_duplicate: bool = False
    created_by_key_id: str | None = None  # the API key that asked for it (None: the CLI, a library call)


@dataclass(frozen=True)
class _New:
    """A save with the ids it gets: its action's tracking id and its message."""

    save: TriggerSave
    tracking_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    message_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def message(self) -> OutgoingMessage:
        return OutgoingMessage(
            queue=self.save.queue,
            body={**self.save.body, "tracking_id": self.tracking_id},
            message_id=self.message_id,
            headers=trace_headers(self.save.traceparent),
        )


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


def _action_values(new: _New, now: datetime) -> tuple[Any, ...]:
    save = new.save
    return (
        new.tracking_id,
        save.league_id,
        save.queue,
        save.key,
        save.team,
        ActionStatus.QUEUED.value,
        _json(save.request),
        _json(save.decision_inputs),
        save.after_tracking_id,
        save.hold_until,
        save.run_id,
        save.traceparent,
        now,
        now,
        save.created_by_key_id,
    )


def _columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as one list per column (the ``unnest`` statements take an array per column)."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


def _sleeper_refusals(news: Sequence[_New]) -> dict[int, Exception]:
    """Index -> refusal, for the saves that name a Sleeper id where an ESPN id belongs (one query)."""
    ids = [pid for new in news for pid in new.save.espn_ids.values() if pid is not None]
    sleeper = sleeper_only_ids(ids) if ids else set()
    if not sleeper:
        return {}
    refusals = {i: sleeper_id_refusal(new.save.espn_ids, sleeper) for i, new in enumerate(news)}
    return {i: refusal for i, refusal in refusals.items() if refusal is not None}


def _insert_new(news: Sequence[_New], *, now: datetime, grace: timedelta) -> dict[str, int]:
    """Insert the actions whose key is free and their outbox rows; tracking id -> outbox id.

    Caller's transaction. Saves go in key order, so concurrent batches take keys in one order.
    """
    ordered = sorted(news, key=lambda n: (n.save.league_id, n.save.queue, n.save.key or ""))
    actions = [_action_values(new, now) for new in ordered]
    inserted = action_sql.insert_many(_columns(actions, 15))
    saved = [n for n in ordered if n.tracking_id in inserted]
    if not saved:
        return {}
    rows = []
    for new in saved:
        message = new.message()
        rows.append(
            (
                message.message_id,
                message.queue,
                _json(message.body),
                json.dumps(message.headers),
                new.tracking_id,
                new.save.held_by,
                now + grace,
                new.save.expires_at,
                now,
            )
        )
    return outbox_sql.insert_many(_columns(rows, 9))


def _row_published(outbox_id: int) -> bool:
    return outbox_sql.status_of(outbox_id) == OutboxStatus.PUBLISHED.value


def _answer(tracking_id: str, outbox_id: int, outcome: PublishOutcome | None) -> SaveOutcome:
    if outcome is None:  # a drain holds the row right now, or it was just published
        try:
            published = _row_published(outbox_id)
        except DatabaseUnavailable as exc:  # saved; the drain publishes it
            return TriggerResult(TriggerStatus.PENDING, tracking_id), exc
        busy = None if published else "a drain is publishing it right now"
        status = TriggerStatus.QUEUED if published else TriggerStatus.PENDING
        return TriggerResult(status, tracking_id, published=published), busy
    if outcome.confirmed:
        return TriggerResult(TriggerStatus.QUEUED, tracking_id, published=True), None
    return TriggerResult(TriggerStatus.PENDING, tracking_id), outcome.error


#: What a value PostgreSQL cannot store raises: the driver's refusal (a NUL in a string) or the
#: server's (DataError and the like, translated by publisher.sql).
_REFUSED_VALUES = (DatabaseRefused, ValueError)


def _save_batch(news: Sequence[_New], *, settings: KickoffSettings) -> tuple[dict[int, Any], dict[str, int]]:
    """The saving transaction: refusals by index, and tracking id -> outbox id of the inserted saves.

    A batch the database refuses as a whole for something other than being unreachable (a value
    one save carries that PostgreSQL rejects) is saved again one save at a time, so only the save
    at fault answers with the error.
    """
    now = utcnow()
    grace = timedelta(seconds=settings.outbox_immediate_grace_seconds)
    try:
        with transaction():
            refusals: dict[int, Any] = _sleeper_refusals(news)
            saved = [n for i, n in enumerate(news) if i not in refusals]
            return refusals, _insert_new(saved, now=now, grace=grace)
    except DatabaseUnavailable:
        raise
    except _REFUSED_VALUES:
        if len(news) == 1:
            raise
    logger.warning("a batch of %s triggers was refused as a whole: saving them one by one", len(news))
    refusals, outbox_ids = {}, {}
    for i, new in enumerate(news):
        try:
            one_refusal, one_saved = _save_batch([new], settings=settings)
        except _REFUSED_VALUES as exc:
            refusals[i] = TriggerValidationError("request", f"the database refused a value of it: {exc}")
            continue
        if one_refusal:
            refusals[i] = one_refusal[0]
        outbox_ids.update(one_saved)
    return refusals, outbox_ids


def save_and_publish(
    saves: Sequence[TriggerSave], *, publisher: AmqpPublisher, settings: KickoffSettings
) -> list[SaveOutcome | Exception]:
    """Save every trigger with its message, then publish the new ones at once; one answer per save.

    Raises DatabaseUnavailable when nothing could be saved. A save may answer with its own
    error: a Sleeper id where an ESPN id belongs, a value the database refuses, or for a held
    key a conflict or the database lost meanwhile; ``outcome_of`` raises it. A publish that
    cannot reach the database after the save answers ``pending`` (the drain publishes the saved
    row). The messages of the new saves and of redelivered duplicates go out in one publish.
    """
    news = [_New(save) for save in saves]
    answers, to_publish = _save_all(news, settings=settings)
    # each save's trigger span is open meanwhile (``send`` waits for this answer) and records the
    # outcome: no publish span of its own
    _publish_saved(to_publish, answers, publisher=publisher, settings=settings, traced=False)
    return [answers[i] for i in range(len(news))]


def _save_all(
    news: Sequence[_New], *, settings: KickoffSettings
) -> tuple[dict[int, SaveOutcome | Exception], dict[int, _Publish]]:
    """Save ``news``: the answers known already (by index), and the saved messages to publish now."""
    answers, outbox_ids = _save_batch(news, settings=settings)
    to_publish: dict[int, _Publish] = {}
    for i, new in enumerate(news):
        if i in answers:
            continue
        outbox_id = outbox_ids.get(new.tracking_id)
        if outbox_id is None:  # the key is held: the duplicate and release rules, one by one
            try:
                settled = _settle_held_key(new, settings=settings)
            except (DatabaseUnavailable, TriggerConflictError) as exc:
                answers[i] = exc
                continue
            if isinstance(settled, _Publish):
                to_publish[i] = settled
            else:
                answers[i] = settled
            continue
        logger.info(
            "trigger saved: tracking_id=%s queue=%s run_id=%s held_by=%s",
            new.tracking_id,
            new.save.queue,
            new.save.run_id,
            new.save.held_by,
        )
        if new.save.held_by is not None:
            answers[i] = TriggerResult(TriggerStatus.PENDING, new.tracking_id, held=True), None
        else:
            to_publish[i] = _Publish(new.tracking_id, outbox_id)
    return answers, to_publish


def _publish_saved(
    to_publish: dict[int, _Publish],
    answers: dict[int, SaveOutcome | Exception],
    *,
    publisher: AmqpPublisher,
    settings: KickoffSettings,
    traced: bool = True,
) -> None:
    """Publish the saved messages at once (one wait for every confirm); their answers into ``answers``.

    ``traced=False``: no publish spans (the triggers' own spans, still open, record the outcomes)."""
    if to_publish:
        try:
            outcomes = publish_rows_now(
                [p.outbox_id for p in to_publish.values()],
                publisher=publisher,
                settings=settings,
                traced=traced,
            )
        except Exception as exc:  # the rows are saved; the drain publishes them
            log = logger.warning if isinstance(exc, DatabaseUnavailable) else logger.exception
            log("immediate publish skipped for %s saved triggers: %s", len(to_publish), exc)
            for i, p in to_publish.items():
                answers[i] = TriggerResult(TriggerStatus.PENDING, p.tracking_id), exc
        else:
            for i, p in to_publish.items():
                answers[i] = _answer(p.tracking_id, p.outbox_id, outcomes.get(p.outbox_id))


class Committer(Protocol):
    """What a trigger hands its save to instead of saving it alone (TriggerCommitter, TriggerGroup)."""

    def submit(self, save: TriggerSave, *, publisher: AmqpPublisher) -> SaveOutcome: ...


class TriggerGroup:
    """Saves triggers in the caller's transaction and publishes them once it committed: all or none.

    Pass it as a trigger's ``committer`` inside ``models.boundary.transaction()``: each trigger is saved (its
    refusal raised, which rolls the whole transaction back) and answers ``pending`` for now; after
    the commit ``publish`` sends every saved message with one wait for the confirms and returns
    the final answers by tracking id. Nothing is published before every save succeeded.
    """

    def __init__(self, *, settings: KickoffSettings) -> None:
        self.settings = settings
        self._to_publish: dict[int, _Publish] = {}
        self._answers: dict[int, SaveOutcome | Exception] = {}

    def submit(self, save: TriggerSave, *, publisher: AmqpPublisher) -> SaveOutcome:
        """Save ``save`` in the caller's transaction (not published yet); its answer for now."""
        answers, to_publish = _save_all([_New(save)], settings=self.settings)
        if 0 in answers:
            return outcome_of(answers[0])
        index = len(self._to_publish)
        self._to_publish[index] = to_publish[0]
        return TriggerResult(TriggerStatus.PENDING, to_publish[0].tracking_id), None

    def publish(self, *, publisher: AmqpPublisher) -> dict[str, TriggerResult]:
        """Publish every saved message (after the commit); tracking id -> its final answer."""
        _publish_saved(self._to_publish, self._answers, publisher=publisher, settings=self.settings)
        out = {}
        for i, pending in self._to_publish.items():
            answer = self._answers[i]
            result = answer[0] if isinstance(answer, tuple) else None
            out[pending.tracking_id] = result or TriggerResult(TriggerStatus.PENDING, pending.tracking_id)
        return out


@dataclass(frozen=True)
class _Delivery:
    """The outbox row of an earlier action, as a duplicate request sees it."""

    outbox_id: int | None = None
    status: str | None = None
    held: bool = False
    expires_at: datetime | None = None


def _existing_delivery(tracking_id: str) -> _Delivery:
    """The outbox row of an action's message (caller's transaction)."""
    row = outbox_sql.first_delivery_of_action(tracking_id)
    return _Delivery() if row is None else _Delivery(row.outbox_id, row.status, row.held, row.expires_at)


@dataclass(frozen=True)
class _Publish:
    """A saved message to publish now, and the action it answers for."""

    tracking_id: str
    outbox_id: int


def _settle_held_key(new: _New, *, settings: KickoffSettings) -> SaveOutcome | _Publish:
    """A save whose key was held: duplicate, or release an expired key and save.

    Locks the key's action (``FOR UPDATE``): a released key (finished past its queue's TTL) is
    moved to ``released_key`` and the save is inserted; otherwise the answer is ``duplicate``
    with the original tracking id. Returns the answer, or the message to publish now: the new
    save's, or with ``redeliver_duplicate`` the earlier action's pending one.
    """
    save, now = new.save, utcnow()
    ttl = release_ttl(save.queue, settings)
    duplicate: TriggerResult | None = None
    pending_outbox_id: int | None = None
    with transaction():
        while not action_sql.insert_one(_action_values(new, now)):
            existing = action_sql.key_action_for_update(
                league_id=save.league_id, kind=save.queue, key=save.key
            )
            if existing is None:
                continue  # released by someone else meanwhile: try again
            old_id = str(existing.tracking_id)
            if not key_is_released(status=existing.status, created_at=existing.created_at, ttl=ttl, now=now):
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
                    if (
                        save.redeliver_duplicate
                        and delivery.expires_at is not None
                        and delivery.expires_at <= now
                    ):
                        raise TriggerConflictError(
                            f"the earlier request {old_id} with this key expired at "
                            f"{delivery.expires_at.isoformat()} before it was delivered"
                        )
                    pending_outbox_id = delivery.outbox_id
                break
            action_sql.release_key(old_id, now=now)
            logger.info("idempotency key released: tracking_id=%s key=%s", old_id, save.key)
        if duplicate is None:
            grace = timedelta(seconds=settings.outbox_immediate_grace_seconds)
            pending_outbox_id = insert_row(
                message=new.message(),
                tracking_id=new.tracking_id,
                next_attempt_at=now + grace,
                held_by=save.held_by,
                expires_at=save.expires_at,
            )
    if duplicate is not None:
        if not (save.redeliver_duplicate and pending_outbox_id is not None):
            return duplicate, None
        logger.info("retry of an undelivered request: publishing tracking_id=%s again", duplicate.tracking_id)
        return _Publish(duplicate.tracking_id, pending_outbox_id)
    logger.info("trigger saved after a key release: tracking_id=%s queue=%s", new.tracking_id, save.queue)
    if save.held_by is not None:
        return TriggerResult(TriggerStatus.PENDING, new.tracking_id, held=True), None
    assert pending_outbox_id is not None
    return _Publish(new.tracking_id, pending_outbox_id)


class _Waiter:
    """One trigger waiting in the committer: its save, then its answer (or error), or a batch to lead."""

    def __init__(self, save: TriggerSave) -> None:
        self.save = save
        self.ready = threading.Event()
        self.batch: list[_Waiter] = []  # set when this caller leads: the saves it runs
        self.outcome: SaveOutcome | Exception | None = None
        self.error: BaseException | None = None


class TriggerCommitter:
    """Group commit for the triggers of one process: those that arrive together are saved together.

    A caller that finds fewer than ``leaders`` batches in flight leads at once with its own
    save. Otherwise it waits; a leader that finishes hands every caller of its batch its
    answer, then gives the waiting callers (up to ``max_batch``) to the first of them to lead,
    so each batch is taken by exactly one leader and as many stay in flight. A lone caller thus
    saves at once, with no hand-off; under load, N concurrent triggers share two commits and one
    wait for the broker's confirms instead of paying for them N times, and the batches in
    flight overlap their waits. Each leader publishes with its own publisher.
    """

    def __init__(self, *, settings: KickoffSettings, max_batch: int = 64, leaders: int = 2) -> None:
        self.settings = settings
        self.max_batch = max_batch
        self.leaders = leaders
        self._lock = threading.Lock()
        self._waiting: list[_Waiter] = []  # non-empty only while ``leaders`` batches are in flight
        self._in_flight = 0

    def submit(self, save: TriggerSave, *, publisher: AmqpPublisher) -> SaveOutcome:
        """Save and publish ``save`` (with whatever else is waiting); its answer, or its error raised."""
        me = _Waiter(save)
        with self._lock:
            if self._in_flight < self.leaders:
                self._in_flight += 1
                me.batch = [me]
            else:
                self._waiting.append(me)
        if not me.batch:
            me.ready.wait()
        if me.batch:
            self._lead(me.batch, publisher)
        if me.error is not None:
            raise me.error
        assert me.outcome is not None
        return outcome_of(me.outcome)

    def _lead(self, batch: list[_Waiter], publisher: AmqpPublisher) -> None:
        try:
            outcomes = save_and_publish([w.save for w in batch], publisher=publisher, settings=self.settings)
        except BaseException as exc:  # every caller of the batch gets the error
            for waiter in batch:
                waiter.error = exc
        else:
            for waiter, outcome in zip(batch, outcomes, strict=True):
                waiter.outcome = outcome
        finally:
            for waiter in batch:
                waiter.batch = []
                waiter.ready.set()
            with self._lock:
                if self._waiting:  # the next batch goes to its first caller; as many stay in flight
                    upcoming = self._waiting[: self.max_batch]
                    del self._waiting[: self.max_batch]
                    upcoming[0].batch = upcoming
                    upcoming[0].ready.set()
                else:
                    self._in_flight -= 1

"""Direct trade publishers: claim the offer, decision or counter in execution_log first, then publish.

No outbox: the claim (unique per queue and key) makes a second approval a duplicate; the
publish follows at once to a durable-declared trade queue. The claim row keeps the body and
message id, so it doubles as the outbox of an outage: a publish the unreachable broker never
got marks the claim ``pending`` and one whose confirm never came marks it ``uncertain``;
``redeliver_trades`` (run by every outbox drain) republishes both with the same message id
(consumers drop a duplicate by it) for as long as the outage lasts. Only the broker's refusal
marks a claim ``failed`` (a decision may be retried). ``kickoff trades`` lists and resolves
claims by hand.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import peewee

from config.clock import utcnow
from config.errors import (
    BrokerConnectionError,
    MissingQueueError,
    PublishError,
    PublishUncertainError,
    TradeError,
    TradeNotFound,
    TriggerValidationError,
)
from config.records import json_fields
from models.db import database, database_errors
from models.execution_log import ExecutionStatus
from publisher import validation as v
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.queues import TRADE_NEGOTIATIONS, TRADE_QUEUES, TRADE_RESPONSES, TRADE_SUBMISSIONS
from publisher.sql import trades as trade_sql
from publisher.trace import check_traceparent, trace_headers

logger = logging.getLogger(__name__)

DECISIONS = frozenset({"accept", "reject"})


class TradeStatus(StrEnum):
    """The answer of a trade publish."""

    PUBLISHED = "published"  # claimed and confirmed by the broker
    PENDING = "pending"  # claimed and saved, not sent (broker unreachable): the drain republishes it
    DUPLICATE = "duplicate"  # the key was claimed before; nothing was published
    FAILED = "failed"  # claimed, but the broker refused the publish (a decision may be retried)
    UNCERTAIN = "uncertain"  # sent, not confirmed: the drain republishes it with the same message id


@dataclass(frozen=True)
class TradeResult:
    """A trade publish's answer."""

    status: TradeStatus
    queue: str
    claim_key: str
    message_id: str
    error: str | None = None

    as_json = json_fields


@dataclass(frozen=True)
class ExecutionEntry:
    """One execution_log claim."""

    queue: str
    claim_key: str
    league_id: str
    team: str | None
    message_id: str
    status: str
    error: str | None
    resolution: str | None
    created_at: Any


def _entry(row: Any) -> ExecutionEntry:
    return ExecutionEntry(
        queue=row[0],
        claim_key=row[1],
        league_id=row[2],
        team=row[3],
        message_id=str(row[4]),
        status=row[5],
        error=row[6],
        resolution=row[7],
        created_at=row[8],
    )


def _set_status(queue: str, key: str, status: ExecutionStatus, error: str | None = None) -> None:
    with database_errors(), database.atomic():
        database.execute_sql(
            trade_sql.SET_STATUS,
            (status.value, error, utcnow(), queue, key),
        )


def _publish_claimed(
    *, queue: str, key: str, message: OutgoingMessage, publisher: AmqpPublisher
) -> TradeResult:
    try:
        publisher.publish(message)
    except PublishUncertainError as exc:
        _set_status(queue, key, ExecutionStatus.UNCERTAIN, str(exc))
        logger.warning(
            "trade publish uncertain, the drain republishes it: queue=%s key=%s: %s", queue, key, exc
        )
        return TradeResult(TradeStatus.UNCERTAIN, queue, key, message.message_id, str(exc))
    except (BrokerConnectionError, MissingQueueError) as exc:
        _set_status(queue, key, ExecutionStatus.PENDING, f"{type(exc).__name__}: {exc}")
        logger.warning(
            "trade publish not sent, the drain republishes it: queue=%s key=%s: %s", queue, key, exc
        )
        return TradeResult(TradeStatus.PENDING, queue, key, message.message_id, str(exc))
    except PublishError as exc:
        _set_status(queue, key, ExecutionStatus.FAILED, f"{type(exc).__name__}: {exc}")
        logger.warning("trade publish failed: queue=%s key=%s: %s", queue, key, exc)
        return TradeResult(TradeStatus.FAILED, queue, key, message.message_id, str(exc))
    _set_status(queue, key, ExecutionStatus.PUBLISHED)
    logger.info("trade published: queue=%s key=%s message_id=%s", queue, key, message.message_id)
    return TradeResult(TradeStatus.PUBLISHED, queue, key, message.message_id)


def _claim_and_publish(
    *,
    queue: str,
    key_field: str,
    key: str,
    league_id: str,
    team: str,
    fields: dict[str, Any],
    traceparent: str | None,
    publisher: AmqpPublisher,
    key_in_result: bool = False,
) -> TradeResult:
    """Build the body (key, league, team, ``fields``, trace), claim ``key`` on ``queue``, publish it.

    ``key_in_result`` records the key as the claim's outcome details (the spec's idempotency key).
    """
    body = {
        key_field: v.text(key, key_field),
        "league_id": v.text(league_id, "league_id"),
        "team_id": v.text(team, "team"),
        **fields,
        "traceparent": check_traceparent(traceparent),
        "created_at": utcnow().isoformat(),
    }
    message_id = str(uuid.uuid4())
    body = v.strip_request_only(body)
    result = json.dumps({"outcome_details": {key_field: body[key_field]}}) if key_in_result else None
    try:
        with database_errors(), database.atomic():
            database.execute_sql(
                trade_sql.INSERT,
                (
                    key,
                    queue,
                    league_id,
                    team,
                    message_id,
                    json.dumps(body),
                    "claimed",
                    result,
                    utcnow(),
                    utcnow(),
                ),
            )
    except peewee.IntegrityError:
        existing = get_entry(queue, key)
        logger.info("trade already claimed: queue=%s key=%s status=%s", queue, key, existing.status)
        return TradeResult(TradeStatus.DUPLICATE, queue, key, existing.message_id)
    message = OutgoingMessage(
        queue=queue, body=body, message_id=message_id, headers=trace_headers(body["traceparent"])
    )
    return _publish_claimed(queue=queue, key=key, message=message, publisher=publisher)


def _ids(values: Any, field: str, check: Any) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise TriggerValidationError(field, "at least one player id is required")
    return [check(x, f"{field}[{i}]") for i, x in enumerate(values)]


def _players(give_player_ids: Any, receive_player_ids: Any, check: Any) -> dict[str, list[Any]]:
    """The give and receive player id lists, each checked by ``check`` (ESPN or Sleeper ids)."""
    return {
        "give_player_ids": _ids(give_player_ids, "give_player_ids", check),
        "receive_player_ids": _ids(receive_player_ids, "receive_player_ids", check),
    }


def submit_offer(
    *,
    offer_key: str,
    league_id: str,
    team: str,
    counterparty_team: str,
    give_player_ids: list[int],
    receive_player_ids: list[int],
    publisher: AmqpPublisher,
    traceparent: str | None = None,
) -> TradeResult:
    """Approve an offer: claim ``offer_key``, publish to trade_submissions (ESPN player ids)."""
    fields = {"counterparty_team_id": v.text(counterparty_team, "counterparty_team")}
    fields |= _players(give_player_ids, receive_player_ids, v.espn_id)
    return _claim_and_publish(
        queue=TRADE_SUBMISSIONS,
        key_field="offer_key",
        key=offer_key,
        league_id=league_id,
        team=team,
        fields=fields,
        traceparent=traceparent,
        publisher=publisher,
    )


def respond_to_trade(
    *,
    decision_key: str,
    league_id: str,
    team: str,
    trade_id: str,
    decision: str,
    publisher: AmqpPublisher,
    traceparent: str | None = None,
) -> TradeResult:
    """Decide an incoming trade: claim ``decision_key``, publish accept/reject to trade_responses."""
    if decision not in DECISIONS:
        raise TriggerValidationError("decision", f"must be one of {sorted(DECISIONS)}")
    return _claim_and_publish(
        queue=TRADE_RESPONSES,
        key_field="decision_key",
        key=decision_key,
        league_id=league_id,
        team=team,
        fields={"trade_id": v.text(trade_id, "trade_id"), "decision": decision},
        traceparent=traceparent,
        publisher=publisher,
    )


def stage_counter(
    *,
    publication_key: str,
    league_id: str,
    team: str,
    trade_id: str,
    give_player_ids: list[str],
    receive_player_ids: list[str],
    publisher: AmqpPublisher,
    traceparent: str | None = None,
) -> TradeResult:
    """Stage a counter-offer on trade_negotiations: Sleeper player ids (the worker maps them)."""
    fields = {"trade_id": v.text(trade_id, "trade_id")}
    fields |= _players(give_player_ids, receive_player_ids, v.sleeper_id)
    return _claim_and_publish(
        queue=TRADE_NEGOTIATIONS,
        key_field="publication_key",
        key=publication_key,
        league_id=league_id,
        team=team,
        fields=fields,
        traceparent=traceparent,
        publisher=publisher,
        key_in_result=True,
    )


def get_entry(queue: str, claim_key: str) -> ExecutionEntry:
    """Return the claim of ``claim_key`` on ``queue``; TradeNotFound if there is none."""
    with database_errors():
        row = database.execute_sql(
            trade_sql.SELECT_ENTRY,
            (queue, claim_key),
        ).fetchone()
    if row is None:
        raise TradeNotFound(f"no execution_log claim for {claim_key!r} on {queue}")
    return _entry(row)


def _republish(entry: ExecutionEntry, publisher: AmqpPublisher) -> TradeResult:
    with database_errors():
        (body,) = database.execute_sql(
            trade_sql.SELECT_BODY,
            (entry.queue, entry.claim_key),
        ).fetchone()
    body = body if isinstance(body, dict) else json.loads(body)
    message = OutgoingMessage(
        queue=entry.queue,
        body=body,
        message_id=entry.message_id,
        headers=trace_headers(body.get("traceparent")),
    )
    return _publish_claimed(queue=entry.queue, key=entry.claim_key, message=message, publisher=publisher)


def retry_decision(*, decision_key: str, publisher: AmqpPublisher) -> TradeResult:
    """``.../decision/retry``: publish a failed or pending decision again with the same message id."""
    entry = get_entry(TRADE_RESPONSES, decision_key)
    if entry.status not in (ExecutionStatus.FAILED, ExecutionStatus.PENDING):
        raise TradeError(
            f"decision {decision_key!r} is {entry.status}; only a failed or pending decision can be retried"
        )
    return _republish(entry, publisher)


@dataclass(frozen=True)
class TradeRedelivery:
    """What one ``redeliver_trades`` call did."""

    published: int = 0  # pending or uncertain claims now confirmed
    failed: int = 0  # refused by the broker (status failed)
    waiting: int = 0  # still pending or uncertain (the broker is away): tried again by the next drain


def redeliverable_trades() -> int:
    """How many claims are pending or uncertain (cheap: the drain connects only when there are some)."""
    with database_errors():
        return database.execute_sql(
            trade_sql.COUNT_IN,
            (ExecutionStatus.PENDING.value, ExecutionStatus.UNCERTAIN.value),
        ).fetchone()[0]


def redeliver_trades(*, publisher: AmqpPublisher, limit: int = 500) -> TradeRedelivery:
    """Republish pending and uncertain claims, oldest first, with their own message ids.

    Safe to run concurrently (rows are taken with ``FOR UPDATE SKIP LOCKED``). Stops at the
    first claim the broker did not take (it is away: the rest wait for the next drain). A
    republished uncertain claim records ``resolution = republish`` by ``drain``.
    """
    published = failed = 0
    with database_errors(), database.atomic():
        rows = database.execute_sql(
            trade_sql.CLAIM_REPUBLISHABLE,
            (ExecutionStatus.PENDING.value, ExecutionStatus.UNCERTAIN.value, limit),
        ).fetchall()
        entries = [_entry(r) for r in rows]
        for n, entry in enumerate(entries):
            result = _republish(entry, publisher)
            if result.status is TradeStatus.PUBLISHED:
                published += 1
                if entry.status == ExecutionStatus.UNCERTAIN:
                    database.execute_sql(
                        trade_sql.RESOLVE,
                        (Resolution.REPUBLISH.value, "drain", utcnow(), entry.queue, entry.claim_key),
                    )
            elif result.status is TradeStatus.FAILED:
                failed += 1
            else:
                if entry.status == ExecutionStatus.UNCERTAIN and result.status is TradeStatus.PENDING:
                    _set_status(entry.queue, entry.claim_key, ExecutionStatus.UNCERTAIN, result.error)
                return TradeRedelivery(published, failed, len(entries) - n)
    if published or failed:
        logger.info("trade claims redelivered: %s published, %s failed", published, failed)
    return TradeRedelivery(published, failed, 0)


def list_uncertain(*, stale_claim_seconds: float = 60.0) -> list[ExecutionEntry]:
    """Claims to reconcile: uncertain ones, and claims stuck in ``claimed`` (a crash mid-publish)."""
    cutoff = utcnow().timestamp() - stale_claim_seconds
    with database_errors():
        rows = database.execute_sql(
            trade_sql.SELECT_UNSETTLED_BEFORE,
            (cutoff,),
        ).fetchall()
    return [_entry(r) for r in rows]


class Resolution(StrEnum):
    """How an operator reconciles an uncertain trade claim."""

    PUBLISHED = "published"  # the worker did receive it (seen in its logs or on ESPN): nothing to send
    NOT_PUBLISHED = "not-published"  # it never arrived: mark failed so it can be retried
    REPUBLISH = "republish"  # send it again now with the same message id (the worker dedupes)


def resolve_uncertain(
    *,
    queue: str,
    claim_key: str,
    resolution: Resolution,
    operator: str,
    publisher: AmqpPublisher | None = None,
) -> ExecutionEntry:
    """Reconcile an uncertain (or stuck) claim and return it as it now stands."""
    if queue not in TRADE_QUEUES:
        raise TriggerValidationError("queue", f"must be one of {list(TRADE_QUEUES)}")
    entry = get_entry(queue, claim_key)
    if entry.status not in (ExecutionStatus.UNCERTAIN, ExecutionStatus.CLAIMED):
        raise TradeError(f"claim {claim_key!r} on {queue} is {entry.status}, not uncertain")
    if resolution is Resolution.REPUBLISH:
        if publisher is None:
            raise TradeError("republish needs a publisher")
        _republish(entry, publisher)
    else:
        status = ExecutionStatus.RESOLVED if resolution is Resolution.PUBLISHED else ExecutionStatus.FAILED
        _set_status(queue, claim_key, status, entry.error)
    with database_errors(), database.atomic():
        database.execute_sql(
            trade_sql.RESOLVE,
            (resolution.value, operator, utcnow(), queue, claim_key),
        )
    logger.info(
        "trade claim reconciled: queue=%s key=%s resolution=%s by=%s", queue, claim_key, resolution, operator
    )
    return get_entry(queue, claim_key)

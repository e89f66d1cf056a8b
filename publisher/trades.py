"""Direct trade publishers: claim the offer, decision or counter in execution_log first, then publish.

No outbox: the claim (unique per league, queue and key: a key one league claimed is free in
every other and says nothing of it) makes a second approval a duplicate; the
publish follows at once to a durable-declared trade queue. The claim row keeps the body and
message id, so it doubles as the outbox of an outage: a publish the unreachable broker never
got marks the claim ``pending``, and ``redeliver_trades`` (run by every outbox drain) republishes
it with the same message id for as long as the outage lasts. One whose confirm never came is
``uncertain``: the broker may hold it, so nothing sends it again by itself; it waits for an
operator (``publisher.trade_reconcile``, ``kickoff trades reconcile``). Only the broker's refusal
marks a claim ``failed``; a failed claim of every kind (offer, decision, counter) can be retried
(``retry_claim``, ``kickoff trades retry``) and waits for an operator's reconcile.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from config import spans
from config.clock import utcnow
from config.errors import ConstraintViolation, KickoffError
from config.records import json_fields
from models.audit import AuditContext
from models.boundary import transaction
from models.execution_log import ExecutionStatus
from publisher import validation as v
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.errors import (
    BrokerConnectionError,
    MissingQueueError,
    PublishError,
    PublishUncertainError,
    TradeClaimAmbiguous,
    TradeError,
    TradeNotFound,
    TriggerValidationError,
    UnusableTradeClaim,
)
from publisher.queues import TRADE_NEGOTIATIONS, TRADE_RESPONSES, TRADE_SUBMISSIONS
from publisher.sql import trades as trade_sql
from publisher.sql.trades import ClaimRow
from publisher.trace import check_traceparent, trace_headers

logger = logging.getLogger(__name__)

DECISIONS = frozenset({"accept", "reject"})

#: The body field that carries each trade queue's claim key.
KEY_FIELDS: dict[str, str] = {
    TRADE_SUBMISSIONS: "offer_key",
    TRADE_RESPONSES: "decision_key",
    TRADE_NEGOTIATIONS: "publication_key",
}


class TradeStatus(StrEnum):
    """The answer of a trade publish."""

    PUBLISHED = "published"  # claimed and confirmed by the broker
    PENDING = "pending"  # claimed and saved, not sent (broker unreachable): the drain republishes it
    DUPLICATE = "duplicate"  # the key was claimed before; nothing was published
    FAILED = "failed"  # claimed, but the broker refused the publish (retry_claim, or reconcile)
    UNCERTAIN = "uncertain"  # sent, not confirmed: waits for an operator (kickoff trades reconcile)


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
    resolved_by: str | None
    resolved_at: Any
    created_at: Any
    trace_id: str | None = None  # the trace the claim was made in (None: untraced)

    as_json = json_fields


def entry_from_row(row: ClaimRow) -> ExecutionEntry:
    """The claim a store's ClaimRow reads."""
    return ExecutionEntry(
        queue=row.queue,
        claim_key=row.claim_key,
        league_id=row.league_id,
        team=row.team,
        message_id=str(row.message_id),
        status=row.status,
        error=row.error,
        resolution=row.resolution,
        resolved_by=row.resolved_by,
        resolved_at=row.resolved_at,
        created_at=row.created_at,
        trace_id=spans.trace_id_of(row.traceparent),
    )


def _set_status(
    league_id: str,
    queue: str,
    key: str,
    status: ExecutionStatus,
    error: str | None = None,
    *,
    only_claimed: bool = False,
) -> bool:
    """Set the claim's status; ``only_claimed``: only while it is still ``claimed``. Whether it was set."""
    return trade_sql.set_claim_status(
        league_id, queue, key, status=status.value, error=error, at=utcnow(), only_claimed=only_claimed
    )


def _publish_claimed(
    *,
    league_id: str,
    queue: str,
    key: str,
    message: OutgoingMessage,
    publisher: AmqpPublisher,
    first: bool = False,
) -> TradeResult:
    """Publish a claim's message and record the outcome as its status.

    ``first``: the publish right after the claim; its outcome is recorded only while the claim is
    still ``claimed``. An operator may have reconciled it meanwhile (published, republished,
    cancelled): that stands, and one warning says what this publish did.
    """

    def record(status: ExecutionStatus, error: str | None = None) -> None:
        if _set_status(league_id, queue, key, status, error, only_claimed=first):
            return
        logger.warning(
            "trade claim reconciled while its first publish was under way, it stays %s: league=%s queue=%s "
            "key=%s message_id=%s publish=%s",
            get_entry(queue, key, league_id=league_id).status,
            league_id,
            queue,
            key,
            message.message_id,
            status.value,
        )

    try:
        publisher.publish(message)
    except PublishUncertainError as exc:
        record(ExecutionStatus.UNCERTAIN, str(exc))
        logger.warning(
            "trade publish uncertain, waits for an operator: queue=%s key=%s message_id=%s: %s",
            queue,
            key,
            message.message_id,
            exc,
        )
        return TradeResult(TradeStatus.UNCERTAIN, queue, key, message.message_id, str(exc))
    except (BrokerConnectionError, MissingQueueError) as exc:
        record(ExecutionStatus.PENDING, f"{type(exc).__name__}: {exc}")
        logger.warning(
            "trade publish not sent, the drain republishes it: queue=%s key=%s: %s", queue, key, exc
        )
        return TradeResult(TradeStatus.PENDING, queue, key, message.message_id, str(exc))
    except PublishError as exc:
        record(ExecutionStatus.FAILED, f"{type(exc).__name__}: {exc}")
        logger.warning("trade publish failed: queue=%s key=%s: %s", queue, key, exc)
        return TradeResult(TradeStatus.FAILED, queue, key, message.message_id, str(exc))
    record(ExecutionStatus.PUBLISHED)
    logger.info("trade published: queue=%s key=%s message_id=%s", queue, key, message.message_id)
    return TradeResult(TradeStatus.PUBLISHED, queue, key, message.message_id)


def _claim_and_publish(
    *,
    queue: str,
    key: str,
    league_id: str,
    team: str,
    fields: dict[str, Any],
    traceparent: str | None,
    publisher: AmqpPublisher,
    key_in_result: bool = False,
    created_by_key_id: str | None = None,
) -> TradeResult:
    """Build the body (key, league, team, ``fields``, trace), claim ``key`` on ``queue``, publish it.

    ``key_in_result`` records the key as the claim's outcome details (the spec's idempotency key).
    """
    key_field = KEY_FIELDS[queue]
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
    context = (
        spans.current_traceparent() or body["traceparent"]
    )  # the claim's: the request's span, else the caller's
    try:
        trade_sql.insert_claim(
            key=key,
            queue=queue,
            league_id=league_id,
            team=team,
            message_id=message_id,
            body=json.dumps(body),
            status="claimed",
            result=result,
            now=utcnow(),
            traceparent=context,
            created_by_key_id=created_by_key_id,
        )
    except ConstraintViolation:  # this league's claim of the key (another league's never meets it)
        existing = get_entry(queue, key, league_id=league_id)
        logger.info(
            "trade already claimed: league=%s queue=%s key=%s status=%s",
            league_id,
            queue,
            key,
            existing.status,
        )
        return TradeResult(TradeStatus.DUPLICATE, queue, key, existing.message_id)
    message = OutgoingMessage(queue=queue, body=body, message_id=message_id, headers=trace_headers(context))
    return _publish_claimed(
        league_id=league_id, queue=queue, key=key, message=message, publisher=publisher, first=True
    )


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


def _audit_claim(audit: AuditContext | None, action: str, target_id: str, **after: Any) -> None:
    """Write a claim request's entry (``action`` on trade ``target_id``) before anything else: an entry
    that cannot be written refuses the request."""
    if audit is not None:
        audit.record(action, "trade", target_id, after=after)


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
    created_by_key_id: str | None = None,
    audit: AuditContext | None = None,
) -> TradeResult:
    """Approve an offer: claim ``offer_key``, publish to trade_submissions (ESPN player ids). With
    ``audit``, audited (trade.approve) before anything else."""
    _audit_claim(audit, "trade.approve", offer_key, league_id=league_id)
    fields = {"counterparty_team_id": v.text(counterparty_team, "counterparty_team")}
    fields |= _players(give_player_ids, receive_player_ids, v.espn_id)
    return _claim_and_publish(
        queue=TRADE_SUBMISSIONS,
        key=offer_key,
        league_id=league_id,
        team=team,
        fields=fields,
        traceparent=traceparent,
        publisher=publisher,
        created_by_key_id=created_by_key_id,
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
    created_by_key_id: str | None = None,
    audit: AuditContext | None = None,
) -> TradeResult:
    """Decide an incoming trade: claim ``decision_key``, publish accept/reject to trade_responses. With
    ``audit``, audited (trade.decide, the trade's id its target) before anything else."""
    _audit_claim(audit, "trade.decide", trade_id, league_id=league_id, decision=decision)
    if decision not in DECISIONS:
        raise TriggerValidationError("decision", f"must be one of {sorted(DECISIONS)}")
    return _claim_and_publish(
        queue=TRADE_RESPONSES,
        key=decision_key,
        league_id=league_id,
        team=team,
        fields={"trade_id": v.text(trade_id, "trade_id"), "decision": decision},
        traceparent=traceparent,
        publisher=publisher,
        created_by_key_id=created_by_key_id,
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
    created_by_key_id: str | None = None,
    audit: AuditContext | None = None,
) -> TradeResult:
    """Stage a counter-offer on trade_negotiations: Sleeper player ids (the worker maps them). With
    ``audit``, audited (trade.counter, the trade's id its target) before anything else."""
    _audit_claim(audit, "trade.counter", trade_id, league_id=league_id, publication_key=publication_key)
    fields = {"trade_id": v.text(trade_id, "trade_id")}
    fields |= _players(give_player_ids, receive_player_ids, v.sleeper_id)
    return _claim_and_publish(
        queue=TRADE_NEGOTIATIONS,
        key=publication_key,
        league_id=league_id,
        team=team,
        fields=fields,
        traceparent=traceparent,
        publisher=publisher,
        key_in_result=True,
        created_by_key_id=created_by_key_id,
    )


def get_entry(
    queue: str,
    claim_key: str,
    *,
    league_id: str | None = None,
    leagues: Collection[str] | None = None,
) -> ExecutionEntry:
    """The claim of ``claim_key`` on ``queue`` in league ``league_id``; without one, the only claim of
    the key among ``leagues`` (None: every league; compared in any case, as a key's league limit).

    TradeNotFound if there is none there (a league outside ``leagues`` has none, as if absent);
    TradeClaimAmbiguous if no league was named and more than one of ``leagues`` has a claim of it.
    """
    allowed = None if leagues is None else {x.casefold() for x in leagues}
    if league_id is not None:
        row = trade_sql.claim_row(league_id, queue, claim_key)
        rows = [row] if row is not None else []
    else:
        rows = trade_sql.claim_rows_of_key(queue, claim_key)
    rows = [r for r in rows if allowed is None or str(r.league_id).casefold() in allowed]
    where = f" in league {league_id}" if league_id is not None else ""
    if not rows:
        raise TradeNotFound(f"no execution_log claim for {claim_key!r} on {queue}{where}")
    if len(rows) > 1:
        named = ", ".join(r.league_id for r in rows)
        raise TradeClaimAmbiguous(
            f"{claim_key!r} on {queue} is claimed in {len(rows)} leagues ({named}): "
            "name the league (league_id, --league)"
        )
    return entry_from_row(rows[0])


def _message_of(entry: ExecutionEntry, body: Any) -> OutgoingMessage:
    """The claim's message as first sent: its stored body, message id and trace header.

    UnusableTradeClaim when the stored claim cannot be that message (not a trade queue, a body
    that is not an object or that names another key).
    """
    key_field = KEY_FIELDS.get(entry.queue)
    if key_field is None:
        raise UnusableTradeClaim(f"queue {entry.queue!r} is not a trade queue")
    if not isinstance(body, dict):
        raise UnusableTradeClaim(f"the stored body is a JSON {type(body).__name__}, not an object")
    if body.get(key_field) != entry.claim_key:
        raise UnusableTradeClaim(
            f"the stored body's {key_field} is {body.get(key_field)!r}, not the claim key {entry.claim_key!r}"
        )
    traceparent = body.get("traceparent")
    if traceparent is not None and not isinstance(traceparent, str):
        raise UnusableTradeClaim(f"the stored body's traceparent is not text: {traceparent!r}")
    return OutgoingMessage(
        queue=entry.queue, body=body, message_id=entry.message_id, headers=trace_headers(traceparent)
    )


def republish(entry: ExecutionEntry, *, publisher: AmqpPublisher) -> TradeResult:
    """Publish a stored claim again with its own message id (consumers drop a duplicate by it).

    The claim's status follows the outcome as on a first publish. UnusableTradeClaim when the
    stored claim cannot be turned back into its message.
    """
    body = trade_sql.claim_body(entry.league_id, entry.queue, entry.claim_key)
    message = _message_of(entry, body)
    return _publish_claimed(
        league_id=entry.league_id,
        queue=entry.queue,
        key=entry.claim_key,
        message=message,
        publisher=publisher,
    )


#: The claim statuses a retry publishes again: refused by the broker, or never sent.
RETRYABLE = (ExecutionStatus.FAILED, ExecutionStatus.PENDING)

#: What each trade queue's claim is called in messages.
CLAIM_KINDS: dict[str, str] = {
    TRADE_SUBMISSIONS: "offer",
    TRADE_RESPONSES: "decision",
    TRADE_NEGOTIATIONS: "counter",
}


def retry_claim(
    *,
    queue: str,
    claim_key: str,
    publisher: AmqpPublisher,
    audit: AuditContext | None = None,
    league_id: str | None = None,
    leagues: Collection[str] | None = None,
) -> TradeResult:
    """Publish a failed or pending claim (an offer, a decision or a counter) again with its message id.

    The claim is the key's in ``league_id``, else its only one among ``leagues`` (get_entry). It is
    locked while it is checked and sent, so two retries cannot both send it; a claim in any other
    status is a TradeError (409), an unknown one TradeNotFound. With ``audit`` the retry is audited
    (trade.retry) in its transaction, before the send (the outcome is the answer and a log line).
    """
    kind = CLAIM_KINDS.get(queue)
    if kind is None:
        raise TriggerValidationError("queue", f"must be one of {sorted(CLAIM_KINDS)}")
    found = get_entry(queue, claim_key, league_id=league_id, leagues=leagues)  # TradeNotFound first
    with transaction():
        entry = entry_from_row(trade_sql.lock_claim(found.league_id, queue, claim_key))
        if entry.status not in RETRYABLE:
            raise TradeError(
                f"{kind} {claim_key!r} is {entry.status}; only a failed or pending {kind} can be retried"
            )
        if audit is not None:  # before the send: an entry that cannot be written refuses the retry
            audit.record(
                "trade.retry",
                "trade",
                f"{queue}/{claim_key}",
                before={"status": str(entry.status), "league_id": entry.league_id},
                after={"message_id": entry.message_id},
            )
        result = republish(entry, publisher=publisher)
    logger.info(
        "trade claim retried: league=%s queue=%s key=%s %s -> %s",
        entry.league_id,
        queue,
        claim_key,
        entry.status,
        result.status,
    )
    return result


def retry_decision(
    *,
    decision_key: str,
    publisher: AmqpPublisher,
    league_id: str | None = None,
    leagues: Collection[str] | None = None,
    audit: AuditContext | None = None,
) -> TradeResult:
    """``.../decision/retry``: publish a failed or pending decision again with the same message id (the
    claim picked, and audited trade.retry, as by retry_claim)."""
    return retry_claim(
        queue=TRADE_RESPONSES,
        claim_key=decision_key,
        publisher=publisher,
        league_id=league_id,
        leagues=leagues,
        audit=audit,
    )


@dataclass(frozen=True)
class TradeRedelivery:
    """What one ``redeliver_trades`` call did."""

    published: int = 0  # pending claims now confirmed
    failed: int = 0  # refused by the broker (status failed)
    waiting: int = 0  # still pending (the broker is away): tried again by the next drain
    uncertain: int = 0  # sent again, no confirm this time either: now waiting for an operator
    set_aside: int = 0  # could not be handled (status set_aside, the reason in error)


def redeliverable_trades() -> int:
    """How many claims are pending (cheap: the drain connects only when there are some)."""
    return trade_sql.count_claims_with_status(list(KEY_FIELDS), ExecutionStatus.PENDING.value)


def trade_claim_counts() -> dict[str, int]:
    """How many trade claims stand in each status (``kickoff_trade_claims``)."""
    return trade_sql.claim_counts_by_status(list(KEY_FIELDS))


def _set_aside(entry: ExecutionEntry, reason: str) -> None:
    _set_status(entry.league_id, entry.queue, entry.claim_key, ExecutionStatus.SET_ASIDE, reason)
    logger.error(
        "trade claim set aside, waits for an operator: league=%s queue=%s key=%s message_id=%s: %s",
        entry.league_id,
        entry.queue,
        entry.claim_key,
        entry.message_id,
        reason,
    )


def _try_republish(entry: ExecutionEntry, publisher: AmqpPublisher) -> TradeResult | str:
    """Republish one claim in a savepoint: its result, or the reason it cannot be handled."""
    try:
        with transaction():  # a savepoint: a claim's failure undoes only its own writes
            return republish(entry, publisher=publisher)
    except UnusableTradeClaim as exc:
        return str(exc)
    except KickoffError:
        raise  # PostgreSQL away and the like: not this claim's fault
    except Exception as exc:  # a fault this claim alone met: it must not stop the drain
        return f"{type(exc).__name__}: {exc}"


def redeliver_trades(*, publisher: AmqpPublisher, limit: int = 500) -> TradeRedelivery:
    """Republish pending claims (known unsent), oldest first, with their own message ids.

    Uncertain claims are left alone: the broker may hold them, so they wait for an operator.
    Each claim is handled on its own: one that cannot be turned back into its message, or whose
    publish fails for a reason that is not the broker's, is set aside (status ``set_aside``, the
    reason as its error, one log line) and the drain goes on. Stops at the first claim the broker
    did not take (it is away: the rest wait for the next drain). Safe to run concurrently (rows
    are taken with ``FOR UPDATE SKIP LOCKED``).
    """
    published = failed = uncertain = set_aside = waiting = 0
    with transaction():
        rows = trade_sql.lock_republishable_claims(list(KEY_FIELDS), ExecutionStatus.PENDING.value, limit)
        entries = [entry_from_row(r) for r in rows]
        for n, entry in enumerate(entries):
            outcome = _try_republish(entry, publisher)
            if isinstance(outcome, str):
                _set_aside(entry, outcome)
                set_aside += 1
            elif outcome.status is TradeStatus.PUBLISHED:
                published += 1
            elif outcome.status is TradeStatus.FAILED:
                failed += 1
            else:  # the broker is away (pending) or the link broke after the send (uncertain)
                uncertain = int(outcome.status is TradeStatus.UNCERTAIN)
                waiting = len(entries) - n - uncertain
                break
    report = TradeRedelivery(published, failed, waiting, uncertain, set_aside)
    if published or failed or uncertain or set_aside:
        logger.info(
            "trade claims redelivered: %s published, %s failed, %s uncertain, %s set aside, %s waiting",
            published,
            failed,
            uncertain,
            set_aside,
            waiting,
        )
    return report

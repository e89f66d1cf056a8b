"""Reconciling trade claims by hand: the claims no drain sends again by itself, and three choices.

A claim waits for an operator when it is ``uncertain`` (sent, the confirm never came: the broker
may hold it), ``failed`` (the broker refused it: an offer, a decision or a counter alike),
``set_aside`` (the drain could not handle it; the reason is its error) or stuck in ``claimed``
longer than ``stale_claim_seconds`` (a crash between claim and publish). The operator
checks the worker's logs or ESPN and resolves it: ``published`` (the worker got it; nothing is
sent), ``republish`` (sent again now with the same message id, so a consumer drops a duplicate)
or ``cancel`` (never sent; its key stays claimed, so a repeat of the request is a duplicate).
The CLI (``kickoff trades reconcile``), the API (``/v1/trade/reconcile``) and the console's
Trades page all call these two functions.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from enum import StrEnum

from config.clock import utcnow
from models.audit import AuditContext
from models.boundary import transaction
from models.execution_log import ExecutionStatus
from publisher.amqp import AmqpPublisher
from publisher.errors import TradeError, TriggerValidationError
from publisher.queues import TRADE_QUEUES
from publisher.sql import trades as trade_sql
from publisher.trades import ExecutionEntry, entry_from_row, get_entry, republish

logger = logging.getLogger(__name__)

#: How long a claim may sit in ``claimed`` (its first publish under way) before it is listed.
STALE_CLAIM_SECONDS = 60.0

#: Statuses that wait for an operator whatever their age (``claimed`` waits once it is stale).
#: A refused (``failed``) claim of every kind waits too: a repeat of its request is a duplicate,
#: so reconcile (or ``publisher.trades.retry_claim``) is its way out.
WAITING = (ExecutionStatus.UNCERTAIN, ExecutionStatus.FAILED, ExecutionStatus.SET_ASIDE)


class Resolution(StrEnum):
    """How an operator reconciles a claim."""

    PUBLISHED = "published"  # the worker did get it (seen in its logs or on ESPN): nothing is sent
    REPUBLISH = "republish"  # send it again now with the same message id (the worker drops a duplicate)
    CANCEL = "cancel"  # it must not go out: never sent again, its key stays claimed


#: The claim status each resolution leaves (republish: whatever the broker answers).
SETTLED = {Resolution.PUBLISHED: ExecutionStatus.RESOLVED, Resolution.CANCEL: ExecutionStatus.CANCELLED}


def claims_to_reconcile(
    *, stale_claim_seconds: float = STALE_CLAIM_SECONDS, limit: int = 1000
) -> list[ExecutionEntry]:
    """Claims waiting for an operator, oldest first: uncertain, failed, set aside, stuck in ``claimed``."""
    cutoff = utcnow() - timedelta(seconds=stale_claim_seconds)
    rows = trade_sql.claims_to_reconcile_rows(
        list(TRADE_QUEUES),
        waiting=[s.value for s in WAITING],
        claimed=ExecutionStatus.CLAIMED.value,
        claimed_before=cutoff,
        limit=limit,
    )
    return [entry_from_row(r) for r in rows]


def _check_waiting(entry: ExecutionEntry, stale_claim_seconds: float) -> None:
    if entry.status in WAITING:
        return
    if entry.status == ExecutionStatus.CLAIMED:
        age = (utcnow() - entry.created_at).total_seconds()
        if age >= stale_claim_seconds:
            return
        raise TradeError(
            f"claim {entry.claim_key!r} on {entry.queue} is being published (claimed {age:.0f} s ago); "
            f"it can be reconciled once it is {stale_claim_seconds:g} s old"
        )
    raise TradeError(
        f"claim {entry.claim_key!r} on {entry.queue} is {entry.status}, not waiting for an operator "
        "(only uncertain, failed, set-aside and stuck claims are reconciled)"
    )


def reconcile_claim(
    *,
    queue: str,
    claim_key: str,
    resolution: Resolution,
    operator: str,
    publisher: AmqpPublisher | None = None,
    stale_claim_seconds: float = STALE_CLAIM_SECONDS,
    audit: AuditContext | None = None,
    league_id: str | None = None,
) -> ExecutionEntry:
    """Resolve one waiting claim as ``resolution`` and return it as it now stands.

    The claim is locked while it is resolved, so two operators cannot both act on it: the
    second gets a TradeError (it is no longer waiting). ``republish`` needs ``publisher``; the
    claim then stands as the broker answered: published, pending (the broker is away: known
    unsent, so the drain sends it), uncertain again, or failed. TradeNotFound for an unknown
    claim; UnusableTradeClaim when a set-aside claim still cannot be turned into its message.
    The claim is the key's in ``league_id``, else its only one (TradeClaimAmbiguous when several
    leagues claimed the key). With ``audit``, the resolution is audited (trade.reconcile) in its
    transaction, before a republish is sent.
    """
    if queue not in TRADE_QUEUES:
        raise TriggerValidationError("queue", f"must be one of {list(TRADE_QUEUES)}")
    resolution = Resolution(resolution)
    if resolution is Resolution.REPUBLISH and publisher is None:
        raise TradeError("republish needs a publisher")
    found = get_entry(queue, claim_key, league_id=league_id)  # TradeNotFound first, outside the transaction
    league = found.league_id
    with transaction():
        row = trade_sql.lock_claim(league, queue, claim_key)
        before = entry_from_row(row)
        _check_waiting(before, stale_claim_seconds)
        if audit is not None:  # before the act: an entry that cannot be written refuses it, nothing sent
            audit.record(
                "trade.reconcile",
                "trade",
                f"{queue}/{claim_key}",
                before={"status": str(before.status), "league_id": league},
                after={"resolution": resolution.value},
            )
        if resolution is Resolution.REPUBLISH:
            assert publisher is not None
            republish(before, publisher=publisher)
        else:
            trade_sql.set_claim_status(
                league, queue, claim_key, status=SETTLED[resolution].value, error=before.error, at=utcnow()
            )
        trade_sql.resolve_claim(
            league, queue, claim_key, resolution=resolution.value, operator=operator, at=utcnow()
        )
    after = get_entry(queue, claim_key, league_id=league)
    logger.info(
        "trade claim reconciled: league=%s queue=%s key=%s message_id=%s %s -> %s (%s by %s)",
        league,
        queue,
        claim_key,
        after.message_id,
        before.status,
        after.status,
        resolution,
        operator,
    )
    return after

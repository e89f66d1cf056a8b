"""Request builders and row readers shared by the publisher tests."""

from __future__ import annotations

import uuid
from typing import Any

import pika
import pytest

from config.clock import utcnow
from models.db import database
from publisher import trades
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.outbox import insert_row
from publisher.queues import LINEUP_UPDATES
from publisher.triggers import DraftPickRequest, LineupRequest, WaiverRequest

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _fields(base: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``kw`` over it (``team`` read as the request's ``team_id``)."""
    if "team" in kw:
        kw = {**kw, "team_id": kw["team"]}
        del kw["team"]
    return {**base, **kw}


def lineup(**kw: Any) -> LineupRequest:
    """A lineup request, unchecked: the trigger checks what the test gives and names a refused field."""
    base: dict[str, Any] = {
        "league_id": "L1",
        "team_id": "7",
        "swaps": [{"player_id": 3139477, "to_slot": "BE"}],
        "idempotency_key": "lineup-7-abc",
    }
    return LineupRequest.unchecked(**_fields(base, kw))


def ir_move(**kw: Any) -> LineupRequest:
    kw.setdefault("swaps", [{"player_id": 4362628, "to_slot": "IR", "kind": "ir"}])
    kw.setdefault("idempotency_key", None)
    return lineup(**kw)


def waiver(**kw: Any) -> WaiverRequest:
    base: dict[str, Any] = {
        "league_id": "L1",
        "team_id": "7",
        "add_player_id": 4430807,
        "drop_player_id": 3916387,
        "idempotency_key": "waiver-7-abc",
    }
    return WaiverRequest.unchecked(**_fields(base, kw))


def draft(**kw: Any) -> DraftPickRequest:
    base = _fields({"league_id": "L1", "team_id": "7", "pick_number": 12, "espn_id": 4426515}, kw)
    base.setdefault("idempotency_key", f"{base['league_id']}:{base['pick_number']}:{base['espn_id']}")
    return DraftPickRequest.unchecked(**base)


def _trade_args(
    own: dict[str, Any], give: list[Any], receive: list[Any], kw: dict[str, Any]
) -> dict[str, Any]:
    """League L1, team 7, the given and received player ids and ``own``; ``kw`` overrides any of them."""
    base = {"league_id": "L1", "team": "7", "give_player_ids": give, "receive_player_ids": receive}
    return base | own | kw


def offer(publisher: AmqpPublisher, **kw: Any) -> trades.TradeResult:
    """Approve a valid offer (ESPN ids) through ``trades.submit_offer``; ``kw`` overrides any argument."""
    own = {"offer_key": "offer-1", "counterparty_team": "3", "traceparent": TRACEPARENT}
    return trades.submit_offer(publisher=publisher, **_trade_args(own, [3139477], [4362628], kw))


def counter(publisher: AmqpPublisher, **kw: Any) -> trades.TradeResult:
    """Stage a valid counter-offer (Sleeper ids) through ``trades.stage_counter``; ``kw`` overrides."""
    own = {"publication_key": "p1", "trade_id": "t1"}
    return trades.stage_counter(publisher=publisher, **_trade_args(own, ["6794"], ["4046"], kw))


def due_rows(n: int, queue: str = LINEUP_UPDATES) -> list[str]:
    """``n`` pending outbox rows due now (bodies ``{"i": 0}``, ``{"i": 1}``...), in one transaction;
    their message ids in insertion order."""
    ids = [str(uuid.uuid4()) for _ in range(n)]
    with database.atomic():
        for i, message_id in enumerate(ids):
            insert_row(
                message=OutgoingMessage(queue=queue, body={"i": i}, message_id=message_id),
                tracking_id=None,
                next_attempt_at=utcnow(),
            )
    return ids


def count(table: str, where: str = "TRUE", params: tuple[Any, ...] = ()) -> int:
    return database.execute_sql(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()[0]


def action(tracking_id: str) -> dict[str, Any]:
    cursor = database.execute_sql("SELECT * FROM activity_actions WHERE tracking_id = %s", (tracking_id,))
    names = [c[0] for c in cursor.description]
    row = cursor.fetchone()
    return dict(zip(names, row, strict=True)) if row else {}


def outbox_row(tracking_id: str) -> dict[str, Any]:
    cursor = database.execute_sql("SELECT * FROM outbox_messages WHERE tracking_id = %s", (tracking_id,))
    names = [c[0] for c in cursor.description]
    row = cursor.fetchone()
    return dict(zip(names, row, strict=True)) if row else {}


#: The queues ``reject_all`` declared during the running test: (AMQP URL, queue). tests/conftest.py
#: deletes them when the test ends, so no later test of the same vhost (a parallel run orders the
#: tests its own way) meets their arguments (406 PRECONDITION_FAILED on a plain declare).
REJECTING: list[tuple[str, str]] = []


def reject_all(amqp_url: str, queue: str) -> None:
    """(Re)declare ``queue`` so that RabbitMQ nacks every publish to it (max length 0, reject-publish)
    until the test ends (then the queue is deleted).

    The broker is there and refuses the message: the one failure that counts towards dead.
    """
    REJECTING.append((amqp_url, queue))
    conn = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        channel = conn.channel()
        channel.queue_delete(queue=queue)
        channel.queue_declare(
            queue=queue, durable=True, arguments={"x-max-length": 0, "x-overflow": "reject-publish"}
        )
    finally:
        conn.close()


def never_confirming(publisher: AmqpPublisher, monkeypatch: pytest.MonkeyPatch) -> AmqpPublisher:
    """Make ``publisher`` lose every confirm the broker sends (a lost confirm)."""
    monkeypatch.setattr(publisher.link, "_on_confirm", lambda frame: None)
    return publisher


def dead_lineups(
    amqp_url: str, *, publisher: Any, settings: Any, keys: tuple[str, ...] = ("lineup-7-abc",)
) -> list[str]:
    """Lineup actions whose outbox rows are dead (refused by the broker to the last attempt): tracking ids."""
    from publisher.drain import drain_outbox
    from publisher.queues import LINEUP_UPDATES
    from publisher.triggers import trigger_lineup

    reject_all(amqp_url, LINEUP_UPDATES)
    ids = [
        trigger_lineup(lineup(idempotency_key=key), publisher=publisher, settings=settings).tracking_id
        for key in keys
    ]
    database.execute_sql(
        "UPDATE outbox_messages SET attempts = %s - 1, next_attempt_at = now()",
        (settings.outbox_max_attempts,),
    )
    drain_outbox(publisher=publisher, settings=settings)
    return ids

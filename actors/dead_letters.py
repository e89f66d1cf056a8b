"""Dead-lettered Dramatiq messages of the Redis broker (BROKER_URL): list them, send them again, purge them.

With the RabbitMQ broker the dead letters are messages on ``{queue}.XQ``: read them with
RabbitMQ's own tools; these functions raise ConfigurationError saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from actors.broker import QUEUES, broker_errors
from actors.listeners import send_start
from config.errors import ConfigurationError, NotFound
from lifecycle.dispatch import request_start
from models import presence
from models.audit import AuditContext


@dataclass(frozen=True)
class RetryResult:
    """A dead letter sent again: its old id, the new message id (None: a start already pending)."""

    message_id: str
    actor: str
    new_message_id: str | None
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "actor": self.actor,
            "new_message_id": self.new_message_id,
            "detail": self.detail,
        }


def _require_redis(broker: Any) -> None:
    if not isinstance(broker, RedisBroker):
        raise ConfigurationError(
            "kickoff dead-letters reads the Redis broker; with BROKER_URL=amqp:// the dead letters are "
            "the messages on default.XQ and match_listeners.XQ (rabbitmqadmin, the management UI)"
        )


def _namespace(broker: Any) -> str:
    return str(broker.namespace)


def list_dead(broker: Any, *, queue: str | None = None, limit: int = 100) -> list[presence.DeadMessage]:
    """The newest dead letters of ``queue`` (every kickoff queue when None), at most ``limit``."""
    _require_redis(broker)
    out: list[presence.DeadMessage] = []
    with broker_errors(broker):
        for q in [queue] if queue else list(QUEUES):
            out.extend(presence.dead_messages(broker.client, _namespace(broker), q, limit=limit))
    out.sort(key=lambda m: m.dead_at, reverse=True)
    return out[:limit]


def _find(broker: Any, message_id: str) -> tuple[str, bytes]:
    for q in QUEUES:
        body = presence.dead_message_body(broker.client, _namespace(broker), q, message_id)
        if body is not None:
            return q, body
    raise NotFound(f"no dead-lettered message {message_id} (kickoff dead-letters list)")


def retry_dead(
    broker: Any,
    message_id: str,
    *,
    coordination: Any,
    audit: AuditContext | None = None,
) -> RetryResult:
    """Send a dead letter again as a new message on its queue, then drop the dead letter.

    A start_match_listener goes through the start path (pending key, stored message id), so a
    match already queued or running is not started twice. With ``audit``, the retry is audited
    (dead_letter.retry) before it is sent.
    """
    _require_redis(broker)
    with broker_errors(broker):
        queue, body = _find(broker, message_id)
        message = dramatiq.Message.decode(body)
        kwargs = dict(message.kwargs or {})
        if audit is not None:  # before the act: an entry that cannot be written refuses the retry
            audit.record(
                "dead_letter.retry",
                "dead_letter",
                message_id,
                after={"actor": message.actor_name, "queue": queue},
            )
        if message.actor_name == "start_match_listener":
            sent, detail = request_start(
                str(kwargs.get("match_id")),
                overrides=kwargs.get("overrides"),
                force=False,
                coordination=coordination,
                send=send_start,
            )
            new_id = sent.message_id if sent else None
        else:
            dramatiq_actor = broker.get_actor(message.actor_name)
            again = dramatiq_actor.send_with_options(args=tuple(message.args or ()), kwargs=kwargs)
            new_id, detail = (
                again.message_id,
                f"sent {message.actor_name} again as {again.message_id} on {queue}",
            )
        presence.drop_dead(broker.client, _namespace(broker), queue, [message_id])
    return RetryResult(message_id=message_id, actor=message.actor_name, new_message_id=new_id, detail=detail)


def purge_dead(
    broker: Any,
    *,
    message_ids: list[str] | None = None,
    queue: str | None = None,
    audit: AuditContext | None = None,
) -> int:
    """Delete the given dead letters (every one of ``queue``, or of every queue, when None); how many.

    With ``audit``, the purge is audited (dead_letter.purge) before anything is deleted.
    """
    _require_redis(broker)
    removed = 0
    if audit is not None:  # before the act: an entry that cannot be written refuses the purge
        audit.record(
            "dead_letter.purge",
            "dead_letter",
            None if message_ids is None else ",".join(message_ids),
            after={"queue": queue, "all": message_ids is None},
        )
    with broker_errors(broker):
        for q in [queue] if queue else list(QUEUES):
            ids = (
                message_ids
                if message_ids is not None
                else presence.all_dead_ids(broker.client, _namespace(broker), q)
            )
            removed += presence.drop_dead(broker.client, _namespace(broker), q, list(ids))
    return removed

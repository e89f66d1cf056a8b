"""The Dramatiq broker's Redis (BROKER_URL) read for operators: worker presence, queue depths, dead letters.

Every worker process marks the queues it consumes in ``{namespace}:kickoff_workers.{queue}`` (a
sorted set: ``host:pid`` scored by the last mark, renewed every few seconds by
actors.middleware.WorkerPresence). Dramatiq's own ``{namespace}:__heartbeats__`` cannot tell
which queue a worker serves, and every sender (a CLI enqueue too) appears in it.

Dramatiq's keys read here: ``{namespace}:{queue}`` (list of waiting message ids),
``{namespace}:{queue}.DQ`` (delayed and retried messages) and ``{namespace}:{queue}.XQ`` (a sorted
set of dead-lettered message ids, their bodies in ``.XQ.msgs``, kept for a week).

Every function here translates its Redis errors (models.coordination.redis_errors, naming BROKER_URL).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import redis

from config.records import json_fields
from models.coordination import redis_errors

P = ParamSpec("P")
R = TypeVar("R")


def _broker_address(client: Any) -> str:
    """The broker Redis ``client`` talks to, as a URL for an error message (no password)."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None) or {}
    return f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


def _broker_errors(fn: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """Run a function of this store on a client inside ``redis_errors``: its driver errors translated
    (RedisUnavailable naming BROKER_URL, RedisCommandRefused)."""

    @functools.wraps(fn)
    def translated(client: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        address = _broker_address(client)
        with redis_errors(url=address, setting="BROKER_URL", service="the Dramatiq broker (Redis)"):
            return fn(client, *args, **kwargs)

    return translated


def presence_key(namespace: str, queue: str) -> str:
    """The sorted set of worker processes consuming ``queue``."""
    return f"{namespace}:kickoff_workers.{queue}"


@_broker_errors
def mark_alive(
    client: redis.Redis, namespace: str, queues: list[str], member: str, *, ttl_seconds: float
) -> None:
    """Mark ``member`` (``host:pid``) alive on each of ``queues`` now; forget marks older than the TTL."""
    now = time.time()
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        key = presence_key(namespace, queue)
        pipe.zadd(key, {member: now})
        pipe.zremrangebyscore(key, 0, now - ttl_seconds)
        pipe.expire(key, int(ttl_seconds * 4) + 1)
    pipe.execute()


@_broker_errors
def forget(client: redis.Redis, namespace: str, queues: list[str], member: str) -> None:
    """Remove ``member`` from each of ``queues`` (a worker that shuts down)."""
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.zrem(presence_key(namespace, queue), member)
    pipe.execute()


@_broker_errors
def workers_alive(client: redis.Redis, namespace: str, queue: str, *, ttl_seconds: float) -> list[str]:
    """Worker processes (``host:pid``) marked alive on ``queue`` within the TTL."""
    members = client.zrangebyscore(presence_key(namespace, queue), time.time() - ttl_seconds, "+inf")
    return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)


@dataclass(frozen=True)
class QueueReport:
    """One queue as the broker holds it."""

    queue: str
    workers: list[str]  # worker processes (host:pid) marked alive within the TTL
    waiting: int  # messages waiting to be taken
    delayed: int  # delayed or retried messages (.DQ)
    dead: int  # dead-lettered messages (.XQ)

    as_dict = json_fields


@_broker_errors
def queue_report(client: redis.Redis, namespace: str, queue: str, *, ttl_seconds: float) -> QueueReport:
    """Workers alive, waiting, delayed and dead-lettered messages of ``queue``."""
    now = time.time()
    pipe = client.pipeline(transaction=False)
    pipe.zrangebyscore(presence_key(namespace, queue), now - ttl_seconds, "+inf")
    pipe.llen(f"{namespace}:{queue}")
    pipe.llen(f"{namespace}:{queue}.DQ")
    pipe.zcard(f"{namespace}:{queue}.XQ")
    members, waiting, delayed, dead = pipe.execute()
    return QueueReport(
        queue=queue,
        workers=sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members),
        waiting=int(waiting),
        delayed=int(delayed),
        dead=int(dead),
    )


@dataclass(frozen=True)
class DeadMessage:
    """A dead-lettered Dramatiq message."""

    message_id: str
    queue: str
    actor: str
    kwargs: dict[str, Any]
    dead_at: float  # unix seconds it was dead-lettered

    as_dict = json_fields


@_broker_errors
def dead_messages(client: redis.Redis, namespace: str, queue: str, *, limit: int) -> list[DeadMessage]:
    """The newest ``limit`` dead-lettered messages of ``queue``."""
    xq = f"{namespace}:{queue}.XQ"
    entries = client.zrevrange(xq, 0, limit - 1, withscores=True)
    ids = [mid.decode() if isinstance(mid, bytes) else str(mid) for mid, _ in entries]
    bodies = client.hmget(f"{xq}.msgs", ids) if ids else []
    out = []
    for (_, score), mid, body in zip(entries, ids, bodies, strict=True):
        data: dict[str, Any] = json.loads(body) if body else {}
        out.append(
            DeadMessage(
                message_id=mid,
                queue=queue,
                actor=str(data.get("actor_name", "?")),
                kwargs=dict(data.get("kwargs") or {}),
                dead_at=float(score) / 1000,  # Dramatiq scores in milliseconds
            )
        )
    return out


@_broker_errors
def dead_message_body(client: redis.Redis, namespace: str, queue: str, message_id: str) -> bytes | None:
    """The encoded body of one dead-lettered message, or None."""
    return client.hget(f"{namespace}:{queue}.XQ.msgs", message_id)


@_broker_errors
def drop_dead(client: redis.Redis, namespace: str, queue: str, message_ids: list[str]) -> int:
    """Delete dead-lettered messages; returns how many were there."""
    if not message_ids:
        return 0
    xq = f"{namespace}:{queue}.XQ"
    pipe = client.pipeline(transaction=True)
    pipe.zrem(xq, *message_ids)
    pipe.hdel(f"{xq}.msgs", *message_ids)
    removed, _ = pipe.execute()
    return int(removed)


@_broker_errors
def all_dead_ids(client: redis.Redis, namespace: str, queue: str) -> list[str]:
    """Every dead-lettered message id of ``queue``."""
    return [
        m.decode() if isinstance(m, bytes) else str(m)
        for m in client.zrange(f"{namespace}:{queue}.XQ", 0, -1)
    ]

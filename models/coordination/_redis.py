"""The Redis side every coordination concern shares: the client, the one Redis error translation,
the Lua script registry and the reads several concerns make (REDIS_URL).

``redis_errors`` is the one boundary of the Redis driver (the Dramatiq broker's Redis uses it too,
naming BROKER_URL); ``translated`` runs a concern's method inside it. ``RedisConcern`` is the base
of each concern store (``StartBarriers``, ``Locks``, ``StopSignals``, ``SchedulerTicks``,
``BulkPreviews``): its client, key prefix, thresholds and registered scripts.
"""

from __future__ import annotations

import contextlib
import functools
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass
from typing import Any, ParamSpec, TypeVar

import redis
from redis.commands.core import Script
from redis.exceptions import ClusterDownError, LockError, LockNotOwnedError, OutOfMemoryError, ReadOnlyError

from config.errors import LockNotOwned, RedisCommandRefused, RedisUnavailable
from config.settings import mask_url
from models.coordination.keys import CoordinationKeys, CoordinationThresholds

P = ParamSpec("P")
R = TypeVar("R")

#: Connections one client keeps at most; a thread that finds them all in use waits (up to the
#: socket timeout) instead of failing, as redis-py's default pool (100, then "Too many connections")
#: would when a thousand listener threads of one process end, or hand off, at once.
REDIS_MAX_CONNECTIONS = 50


def connect_redis(url: str) -> redis.Redis:
    """Return a client for ``url`` (no connection is opened until the first command)."""
    pool = redis.BlockingConnectionPool.from_url(
        url, max_connections=REDIS_MAX_CONNECTIONS, timeout=10, socket_connect_timeout=5, socket_timeout=10
    )
    return redis.Redis(connection_pool=pool)


#: Error codes with which Redis refuses every write, whatever the key: the server is not usable
#: (full at maxmemory, failing to save, its master gone, a script running, loading its data, a
#: read-only replica). A script's error starts with the code; a pipeline's carries it after
#: "caused error: ". Any other refusal (WRONGTYPE, ...) is about one key's data.
_OUTAGE_CODE = re.compile(
    r"(?:^|caused error: )(?:OOM|MISCONF|MASTERDOWN|BUSY|LOADING|READONLY|NOREPLICAS|CLUSTERDOWN|TRYAGAIN)\b"
)


def refuses_every_write(exc: redis.ResponseError) -> bool:
    """True when ``exc`` says Redis as a whole refuses commands (an outage), not one key's data."""
    return isinstance(exc, OutOfMemoryError | ReadOnlyError | ClusterDownError) or bool(
        _OUTAGE_CODE.search(str(exc))
    )


@contextmanager
def redis_errors(*, url: str, setting: str = "REDIS_URL", service: str = "Redis") -> Iterator[None]:
    """The one boundary of the Redis driver: a refused or timed-out command becomes RedisUnavailable.

    So does a command Redis refuses as a whole (OOM, MISCONF, ...: ``refuses_every_write``); a
    command refused for one key's data (WRONGTYPE, ...) becomes RedisCommandRefused.

    ``setting`` names what an operator should look at: REDIS_URL for kickoff's keys, BROKER_URL
    for Dramatiq's broker (sends, queue depths, worker heartbeats).
    """
    try:
        yield
    except (LockNotOwnedError, LockError) as exc:
        raise LockNotOwned(str(exc)) from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise RedisUnavailable(
            service=service, setting=setting, address=mask_url(url), reason=str(exc) or type(exc).__name__
        ) from exc
    except redis.ResponseError as exc:
        if refuses_every_write(exc):
            raise RedisUnavailable(
                service=service, setting=setting, address=mask_url(url), reason=str(exc)
            ) from exc
        raise RedisCommandRefused(f"{service} refused a command: {exc}") from exc


def translated(fn: Callable[P, R]) -> Callable[P, R]:
    """Run a method of an object with a ``url`` inside ``redis_errors``."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with redis_errors(url=args[0].url):  # type: ignore[attr-defined]
            return fn(*args, **kwargs)

    return wrapper


def text(raw: Any) -> str | None:
    """A Redis reply as text (redis-py answers bytes)."""
    return raw.decode() if isinstance(raw, bytes) else raw


# KEYS[1]: a key; ARGV[1]: the value it must hold to be deleted (a lock's token, a mark).
DELETE_IF_TOKEN = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


@dataclass(eq=False, repr=False)
class RedisConcern(CoordinationKeys, CoordinationThresholds):
    """One concern's store: the client, key prefix and URL (REDIS_URL) and the thresholds, shared
    by every concern of one ``CoordinationStore``; keys are named by ``CoordinationKeys``."""

    client: redis.Redis
    _: KW_ONLY
    prefix: str
    url: str

    def __post_init__(self) -> None:
        self._scripts: dict[str, Script] = {}

    def _script(self, source: str) -> Script:
        """The registered Lua script of ``source`` (EVALSHA, loaded once per client)."""
        if source not in self._scripts:
            self._scripts[source] = self.client.register_script(source)
        return self._scripts[source]

    def _read_each(
        self, match_ids: Sequence[str], *reads: tuple[str, Callable[[object], str]]
    ) -> list[list[Any]]:
        """For each match id, each ``(command, key_of)`` read (``get``, ``exists``) of its key, in one
        pipelined round trip; the answers per match, in order."""
        if not match_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for mid in match_ids:
            for command, key_of in reads:
                getattr(pipe, command)(key_of(mid))
        flat = pipe.execute()
        return [flat[i : i + len(reads)] for i in range(0, len(flat), len(reads))]

    def _set_among(self, key_of: Callable[[Any], str], ids: Iterable[object]) -> set[str]:
        """Which of ``ids`` (as strings) have their key of one family set (one MGET)."""
        wanted = [str(i) for i in ids]
        if not wanted:
            return set()
        values = self.client.mget([key_of(i) for i in wanted])
        return {i for i, v in zip(wanted, values, strict=True) if v is not None}

    def _ids_of(self, key_of: Callable[[object], str]) -> list[str]:
        """The match ids (UUIDs) of every key of one family (SCAN)."""
        start = len(key_of(""))
        found = []
        for raw in self.client.scan_iter(match=key_of("*"), count=1000):
            with contextlib.suppress(ValueError):
                found.append(str(uuid.UUID(text(raw)[start:])))
        return found

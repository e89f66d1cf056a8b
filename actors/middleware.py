"""Dramatiq middleware of kickoff: a database connection per message, log context, trace context, boot
and shutdown hooks."""

from __future__ import annotations

import gc
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

import pendulum
from dramatiq.middleware import Middleware, MiddlewareError, SkipMessage
from periodiq import PeriodiqMiddleware

from config import spans
from config.log import install_formatter, set_log_context
from config.periodic import PeriodicThread
from models.db import release_connection
from models.presence import forget, mark_alive

logger = logging.getLogger(__name__)


class DatabaseConnectionMiddleware(Middleware):
    """Close the worker thread's PostgreSQL connection when a message ends.

    Connections open lazily (the Peewee database autoconnects per thread on the first query),
    so an actor that never queries never connects, and a long actor (a listener) can close its
    connection early and reopen it for its final write.
    """

    def _close(self) -> None:

        try:
            release_connection()
        except Exception:  # a broken connection must not fail the message bookkeeping
            logger.warning("closing the database connection failed", exc_info=True)

    def after_process_message(self, broker: Any, message: Any, *, result: Any = None, exception: Any = None):
        self._close()

    def after_skip_message(self, broker: Any, message: Any) -> None:
        self._close()


class LogContextMiddleware(Middleware):
    """Name the message a worker thread processes on its log records (config.log).

    Every record logged while a message runs carries its actor, message id and, when its
    kwargs name one, the match id. At process boot it installs kickoff's log format on the
    worker's log pipe (LOG_FORMAT), so worker lines look like the CLI's.
    """

    def __init__(self, *, log_format: str = "text") -> None:
        self.log_format = log_format

    def after_process_boot(self, broker: Any) -> None:

        install_formatter(self.log_format)

    def before_process_message(self, broker: Any, message: Any) -> None:
        match_id = (message.kwargs or {}).get("match_id")
        set_log_context(
            actor=message.actor_name,
            message_id=message.message_id,
            match_id=str(match_id) if match_id else None,
        )

    def after_process_message(self, broker: Any, message: Any, *, result: Any = None, exception: Any = None):
        set_log_context(actor=None, message_id=None, match_id=None)

    after_skip_message = after_process_message  # type: ignore[assignment]


class TracingMiddleware(Middleware):
    """Carry the trace context on every message and make one span of each message a worker processes.

    Dramatiq has no maintained OpenTelemetry instrumentation, so this is it: a message sent inside a
    span carries the span's ``traceparent`` (and ``tracestate``) in its options; the worker that
    processes it runs the actor in a ``<actor> process`` span (kind consumer) whose parent is that
    context, or a new trace when it has none (a scheduler tick). Added to the broker only while
    tracing is on (config.tracing), so it costs nothing when off.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def before_enqueue(self, broker: Any, message: Any, delay: Any) -> None:
        message.options.update(spans.headers_of())

    def before_process_message(self, broker: Any, message: Any) -> None:
        options = message.options
        match_id = (message.kwargs or {}).get("match_id")
        current = spans.start_span(
            f"{message.actor_name} process",
            parent={k: options.get(k) for k in (spans.TRACEPARENT, spans.TRACESTATE)},
            kind=spans.SpanKind.CONSUMER,
            attributes={
                "messaging.system": "dramatiq",
                "messaging.destination.name": message.queue_name,
                "messaging.message.id": message.message_id,
                "kickoff.match_id": match_id,
            },
        )
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append((current, spans.attach(current)))

    def after_process_message(self, broker: Any, message: Any, *, result: Any = None, exception: Any = None):
        stack = self._local.__dict__.get("stack")
        if not stack:
            return
        current, token = stack.pop()
        spans.detach(token)
        spans.end_span(current, error=exception)

    def after_skip_message(self, broker: Any, message: Any) -> None:
        stack = self._local.__dict__.get("stack")
        if stack and stack[-1][0] is not None:
            stack[-1][0].set_attribute("kickoff.skipped", True)
        self.after_process_message(broker, message)


class WorkerPresence(Middleware):
    """Mark this worker process alive on each queue it consumes (models.presence), from boot to shutdown.

    A daemon thread renews the mark every ``interval_seconds``; ``kickoff check`` counts the
    marks younger than ``ttl_seconds`` per queue. ``client`` is the broker's Redis (Redis broker)
    or REDIS_URL's (RabbitMQ broker). A Redis error is logged and retried next time.
    """

    def __init__(self, *, client: Any, namespace: str, ttl_seconds: float) -> None:
        self.client = client
        self.namespace = namespace
        self.ttl_seconds = ttl_seconds
        self.interval_seconds = max(0.5, ttl_seconds / 6)
        self.member = f"{socket.gethostname()}:{os.getpid()}"
        self.queues: list[str] = []
        self._renewer = PeriodicThread(
            self._renew, interval=self.interval_seconds, name="kickoff-worker-presence", wait_first=False
        )

    def after_worker_boot(self, broker: Any, worker: Any) -> None:
        self.member = f"{socket.gethostname()}:{os.getpid()}"
        self.queues = sorted(q for q in getattr(worker, "consumers", {}) if not q.endswith((".DQ", ".XQ")))
        self._renewer.start()

    def _renew(self) -> None:

        try:
            mark_alive(self.client, self.namespace, self.queues, self.member, ttl_seconds=self.ttl_seconds)
        except Exception as exc:  # Redis down: the broker itself reports it; try again
            logger.warning("worker presence not renewed: %s", exc)

    def before_worker_shutdown(self, broker: Any, worker: Any) -> None:

        self._renewer.stop()
        try:
            forget(self.client, self.namespace, self.queues, self.member)
        except Exception as exc:
            logger.warning("worker presence not removed: %s", exc)


class ScheduledTickMiddleware(PeriodiqMiddleware):
    """Periodiq's skip of late ticks, for every message that carries ``scheduled_at``.

    kickoff's periodic table (scheduler/) is data, not an actor option, so the check keys on the
    message: a tick that waited longer than ``skip_delay`` seconds in the queue is skipped (the
    next tick comes within a minute anyway). Messages without ``scheduled_at`` run normally.
    """

    def before_process_message(self, broker: Any, message: Any) -> None:
        scheduled_at = message.options.get("scheduled_at")
        if not scheduled_at:
            return
        delta = pendulum.now() - pendulum.parse(scheduled_at)
        if delta.total_seconds() > self.skip_delay:
            logger.info(
                "skipping tick %s of %s: %.0f s late",
                message.message_id,
                message.actor_name,
                delta.total_seconds(),
            )
            raise SkipMessage()


class BootCheckFailed(MiddlewareError):
    """A worker boot check failed: the worker process stops before its threads start.

    A MiddlewareError, which Dramatiq lets out of the worker's boot (it logs any other one and
    boots on): the worker process exits and the ``dramatiq`` command stops its other processes.
    """


#: The collector's full passes of a worker process the ``dramatiq`` command started come after this
#: many passes of its middle generation (CPython's default: 10). A 2,500-listener worker holds about
#: 700,000 tracked objects; a full pass over them took 0.6 s of a core, every thread of the process
#: stopped meanwhile, and came every 16 s: about 4 % of the process's stream messages were late by up
#: to 0.6 s, the tail of issue 34's 10,000-listener figure (docs/scaling.md). The objects a full pass
#: finds to free are few (a cycle left by an ended run), so freeing them later costs little memory.
WORKER_FULL_PASS_AFTER = 100


class WorkerHooks(Middleware):
    """Run registered callbacks as a worker process boots and when it starts a graceful shutdown.

    The listener lifecycle registers a boot check (a listener worker reads its listener settings
    before its threads start: an invalid one stops it), a boot hook (a listener worker takes its
    lease and starts reaping dead workers' runs at once) and a shutdown hook (running listeners
    end with a recorded exit instead of leaving their rows open). In a worker process the ``dramatiq``
    command started, what the process holds once the boot hooks ran is frozen (``gc.freeze``): left
    out of the garbage collector's passes, and a full pass comes after ``WORKER_FULL_PASS_AFTER``
    passes of the middle generation instead of 10. A worker started in another process (a test's)
    changes nothing of that process's collector.
    """

    def __init__(self) -> None:
        self._checks: list[Callable[[Any], None]] = []
        self._boot: list[Callable[[Any], None]] = []
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._worker_process = False  # the dramatiq command's worker process (its process boot ran)

    def _add(self, registry: list[Callable[..., None]], hook: Callable[..., None]) -> None:
        with self._lock:
            if hook not in registry:
                registry.append(hook)

    def _copy(self, registry: list[Callable[..., None]]) -> list[Callable[..., None]]:
        with self._lock:
            return list(registry)

    def adopt(self, other: WorkerHooks) -> None:
        """Take over the hooks registered with ``other`` (a broker replaced by another)."""
        for check in other._copy(other._checks):
            self.register_boot_check(check)
        for hook in other._copy(other._boot):
            self.register_boot(hook)
        for plain in other._copy(other._hooks):
            self.register(plain)
        self._worker_process = self._worker_process or other._worker_process

    def register_boot_check(self, check: Callable[[Any], None]) -> None:
        """Call ``check(worker)`` (once) before the worker process starts its threads.

        An exception it raises is logged and stops the worker process (BootCheckFailed; Dramatiq
        then stops the whole command): no message is taken by a worker that cannot run it.
        """
        self._add(self._checks, check)

    def register_boot(self, hook: Callable[[Any], None]) -> None:
        """Call ``hook(worker)`` (once) after the worker process booted."""
        self._add(self._boot, hook)

    def register(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` (once) at the start of the worker's graceful shutdown."""
        self._add(self._hooks, hook)

    def after_process_boot(self, broker: Any) -> None:
        self._worker_process = True  # emitted only by the dramatiq command, in each worker process

    def before_worker_boot(self, broker: Any, worker: Any) -> None:
        for check in self._copy(self._checks):
            try:
                check(worker)
            except Exception as exc:
                logger.critical("worker boot check %s failed; the worker stops: %s", check.__name__, exc)
                raise BootCheckFailed(f"{check.__name__}: {exc}") from exc

    def after_worker_boot(self, broker: Any, worker: Any) -> None:
        for hook in self._copy(self._boot):
            try:
                hook(worker)
            except Exception:
                logger.exception("worker boot hook %r failed", hook)
        if self._worker_process:
            # What boot made (modules, the broker, pools, the hooks' services) lives as long as the
            # process: kept out of the collector's full passes, as ``kickoff serve`` does (api.app). A
            # 1,000-listener worker's full passes then scan about 280,000 objects instead of 400,000:
            # 55 ms instead of 75 ms each, all its threads stopped meanwhile (docs/scaling.md).
            gc.freeze()
            # A full pass stops every thread of the process: one every WORKER_FULL_PASS_AFTER passes
            # of the middle generation, not CPython's 10 (a 2,500-listener worker: 0.6 s every 16 s
            # before, every ~39 s with it).
            young, middle, _ = gc.get_threshold()
            gc.set_threshold(young, middle, WORKER_FULL_PASS_AFTER)

    def before_worker_shutdown(self, broker: Any, worker: Any) -> None:
        for hook in self._copy(self._hooks):
            try:
                hook()
            except Exception:
                logger.exception("worker shutdown hook %r failed", hook)

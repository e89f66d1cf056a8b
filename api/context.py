"""What every request handler shares: settings, Redis coordination, the catalog, the trigger committer and a
publisher per thread."""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from api.readiness import Readiness
from config.settings import KickoffSettings
from models.coordination import CoordinationStore
from models.db import init_database
from models.history_recorder import recorder
from publisher.amqp import AmqpPublisher, publisher_from_settings
from publisher.trigger_saves import TriggerCommitter
from runs.catalog import load_catalog

if TYPE_CHECKING:
    from runs.catalog import Catalog


#: Request threads of an API process (anyio's default) and the size of its pool when the setting is unset.
REQUEST_THREADS = 40


class ApiContext:
    """Settings read once at boot; services opened on first use (a publisher per handler thread).

    The settings are KickoffSettings: the API runs no listener. Its listener routes and the console
    dispatch, stop and sweep listeners and judge their heartbeats by the listener lifecycle settings
    KickoffSettings holds; a run's own settings are built by the worker that runs it.
    """

    def __init__(self, *, settings: KickoffSettings) -> None:
        self.settings = settings
        self._local = threading.local()
        self._publishers: list[AmqpPublisher] = []
        self._lock = threading.Lock()
        #: The process's group commit: concurrent triggers share their transactions and confirm wait.
        self.committer = TriggerCommitter(settings=settings)

    def boot(self) -> None:
        """Before the first request: set up the Dramatiq broker, then bind the model layer.

        Importing ``actors`` sets the broker and binds the database proxy from the environment;
        doing it here, not on the first start or dispatch request, means the proxy is never
        rebound while other requests use it. The proxy is then bound to these settings.
        """
        import actors  # noqa: F401, PLC0415  the broker of start messages: importing it configures the runtime

        self.database()
        self.limit_request_threads(self.pool_size or REQUEST_THREADS)
        # the trigger answers this process gives are history (models.history_recorder)
        recorder.start(
            interval_seconds=self.settings.history_flush_seconds,
            max_pending=self.settings.history_max_pending_points,
        )

    @property
    def pool_size(self) -> int:
        """PostgreSQL connections this process keeps at most (DATABASE_POOL_MAX_CONNECTIONS, unset:
        REQUEST_THREADS; 0: no pool)."""
        size = self.settings.database_pool_max_connections
        return REQUEST_THREADS if size is None else size

    def database(self) -> None:
        """Bind the model layer to DATABASE_URL through the process's pool (a request thread takes one
        connection on first use and keeps it; a retired thread's connection is reclaimed)."""

        init_database(
            self.settings.database_url,
            connect_timeout_seconds=self.settings.database_connect_timeout_seconds,
            statement_timeout_seconds=self.settings.database_statement_timeout_seconds,
            pool_max_connections=self.pool_size,
            pool_max_age_seconds=self.settings.database_pool_max_age_seconds,
        )

    @staticmethod
    def limit_request_threads(threads: int) -> None:
        """At most ``threads`` request threads at once (anyio's default limiter: sync routes and every
        ``run_in_threadpool``), so the threads never hold more connections than the pool has."""

        anyio.to_thread.current_default_thread_limiter().total_tokens = threads

    def publisher(self) -> AmqpPublisher:
        """This thread's RabbitMQ publisher (pika connections are not thread-safe)."""
        pub = getattr(self._local, "publisher", None)
        if pub is None:
            pub = publisher_from_settings(self.settings)
            self._local.publisher = pub
            with self._lock:
                self._publishers.append(pub)
        return pub

    @cached_property
    def readiness(self) -> Readiness[tuple[dict[str, object], int]]:
        """The kept /readyz answer and the AMQP connection its probes reuse."""

        return Readiness(settings=self.settings)

    @cached_property
    def coordination(self) -> CoordinationStore:
        """The Redis coordination store on REDIS_URL (the client's pool is shared by every thread)."""

        return CoordinationStore.from_settings(self.settings)

    @cached_property
    def catalog(self) -> Catalog:
        """The job catalog (JOB_CATALOG_PATH), read once."""

        return load_catalog(self.settings.job_catalog_path)

    def send_start(self) -> Any:
        """The Dramatiq sender of listener start messages (actors is imported by ``boot``)."""
        from actors.listeners import send_start  # noqa: PLC0415  actors is imported (and configured) by boot

        return send_start

    def send_backfill(self) -> Any:
        """The Dramatiq sender of archive backfills (the sweep's; actors is imported by ``boot``)."""
        from actors.archive import send_backfill  # noqa: PLC0415  actors is imported (and configured) by boot

        return send_backfill

    def close(self) -> None:
        """Close every publisher this process opened; stop counting history and flush what is left."""
        recorder.stop()
        with self._lock:
            pubs, self._publishers = self._publishers, []
        for pub in pubs:
            pub.close()
        if "readiness" in self.__dict__:
            self.readiness.close()

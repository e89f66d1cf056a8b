"""The object every command receives: settings read once, services opened on first use."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from config.settings import KickoffSettings, load_settings

if TYPE_CHECKING:
    from models.audit import Actor, AuditContext
    from models.coordination import CoordinationStore

logger = logging.getLogger(__name__)


@dataclass
class CliContext:
    """Settings plus lazily opened database and Redis handles for one CLI invocation.

    The settings are KickoffSettings: the operator commands start, stop, sweep and judge listeners by
    the listener lifecycle settings it holds. A command that runs a listener (``kickoff listen``) or
    prints a listener's settings (``kickoff config show``) reads MatchListenerEnvironment itself.
    """

    settings: KickoffSettings = field(default_factory=load_settings)
    verbose: bool = False
    _db_ready: bool = False

    def log_progress(self) -> None:
        """Log at LOG_LEVEL (DEBUG with -v): for commands that run on and report through their logs.

        One-shot commands print what they did and log warnings only, so nothing is said twice.
        """
        level = logging.DEBUG if self.verbose else getattr(logging, self.settings.log_level)
        logging.getLogger().setLevel(level)

    def database(self) -> None:
        """Bind the model layer to DATABASE_URL and check that PostgreSQL answers."""
        if self._db_ready:
            return
        from models.db import check_connection, init_database

        init_database(
            self.settings.database_url,
            connect_timeout_seconds=self.settings.database_connect_timeout_seconds,
            statement_timeout_seconds=self.settings.database_statement_timeout_seconds,
        )
        check_connection(self.settings.database_url)
        self._db_ready = True

    @cached_property
    def actor(self) -> Actor:
        """Who runs this command, for the audit log: ``os_user@host``."""
        from models.audit import Actor

        return Actor.cli()

    def audit(self, reason: str | None = None) -> AuditContext:
        """What this command's act is audited with: the CLI's user and ``reason``."""
        from models.audit import AuditContext

        return AuditContext(self.actor, reason)

    @cached_property
    def coordination(self) -> CoordinationStore:
        """The Redis coordination store on REDIS_URL (pinged once, so an outage is one clear line)."""
        from models.coordination import CoordinationStore

        coordination = CoordinationStore.from_settings(self.settings)
        coordination.ping()
        return coordination

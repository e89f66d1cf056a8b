"""Match: one game, its status, and whether the dispatcher may start a listener for it."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

import peewee
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField
from models.league import League
from models.status import apply_stream_status, refreshed_status

logger = logging.getLogger(__name__)

#: Set on an is_test clone until srsim serves its script (srsim.status.StatusWriter.mark_served).
SRSIM_UNSERVED = "srsim_unserved"
#: Keys of ``listener_start_settings`` that are bookkeeping, not listener settings.
METADATA_KEYS = frozenset({"message_id", SRSIM_UNSERVED})


class Match(BaseModel):
    """A game from the provider's schedule (or an is_test clone replayed by srsim).

    ``id`` is kickoff's internal UUID; ``sr_id`` is the provider's match id.
    """

    id = peewee.UUIDField(primary_key=True, default=uuid.uuid4)
    sr_id = peewee.TextField(unique=True)
    league = peewee.ForeignKeyField(League, backref="matches", on_delete="CASCADE")
    title = peewee.TextField(null=True)
    scheduled = UTCDateTimeField()
    status = peewee.TextField(default="scheduled")
    is_test = peewee.BooleanField(default=False)
    auto_dispatch_listener = peewee.BooleanField(default=True)
    listener_start_settings = BinaryJSONField(default=dict)
    sr_status = peewee.TextField(null=True)  # last status the schedule API reported
    refreshed_at = UTCDateTimeField(null=True)  # last schedule refresh that saw this match
    created_at = UTCDateTimeField(default=utcnow)
    updated_at = UTCDateTimeField(default=utcnow)

    class Meta:
        table_name = "matches"

    def has_in_game_questions(self) -> bool:
        """Whether at least one in-game question was issued for this match."""
        from models.question import Question

        return Question.select().where(Question.match == self.id, Question.in_game).exists()

    def apply_refresh(self, incoming: str, *, now: datetime | None = None) -> str:
        """Apply a schedule-refresh status (freeze/heal) and save; return the stored status."""
        now = now or utcnow()
        new = refreshed_status(
            self.status,
            incoming,
            has_in_game_questions=self.has_in_game_questions(),
            scheduled=self.scheduled,
            now=now,
        )
        self._save_status(new, sr_status=incoming, refreshed_at=now)
        return new

    def apply_stream(self, incoming: str) -> str:
        """Apply a push-stream status (never pregame, never reopen terminal); return it."""
        new = apply_stream_status(self.status, incoming)
        if new != self.status:
            self._save_status(new)
        return new

    def _save_status(self, status: str, **extra: Any) -> None:
        if status != self.status:
            logger.info("match %s status %s -> %s", self.id, self.status, status)
        self.status = status
        for name, value in extra.items():
            setattr(self, name, value)
        self.updated_at = utcnow()
        fields = [Match.status, Match.updated_at, *(getattr(Match, n) for n in extra)]
        self.save(only=fields)

    def start_settings_without_metadata(self) -> dict[str, Any]:
        """Return ``listener_start_settings`` minus the bookkeeping keys."""
        return {k: v for k, v in (self.listener_start_settings or {}).items() if k not in METADATA_KEYS}

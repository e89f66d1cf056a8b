"""Match: one game, its status, and whether the dispatcher may start a listener for it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import peewee
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField
from models.boundary import translate_database_errors
from models.db import connection_scope, database
from models.errors import FencedWrite, MatchNotFound
from models.league import League
from models.status import TERMINAL, apply_stream_status, refreshed_status

logger = logging.getLogger(__name__)

#: Set on an is_test clone until srsim serves its script (srsim.status.StatusWriter.mark_served).
SRSIM_UNSERVED = "srsim_unserved"
#: Keys of ``listener_start_settings`` that are bookkeeping, not listener settings, stripped before
#: validation (``message_id``: where the queued start's id was kept before it got its own column;
#: ``celery_task_id``: the spec's reserved key for the same, as rows written by its Celery
#: deployment carry it).
METADATA_KEYS = frozenset({"message_id", "celery_task_id", SRSIM_UNSERVED})
#: How often a status write re-reads and re-applies its rule after losing a race before it gives up.
_STATUS_WRITE_TRIES = 10


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
    start_message_id = peewee.TextField(null=True)  # the queued start's Dramatiq message id
    sr_status = peewee.TextField(null=True)  # last status the schedule API reported
    refreshed_at = UTCDateTimeField(null=True)  # last schedule refresh that saw this match
    created_at = UTCDateTimeField(default=utcnow)
    updated_at = UTCDateTimeField(default=utcnow)
    archive_verified_at = UTCDateTimeField(null=True)  # last verify-archive of this match
    archive_verification = BinaryJSONField(null=True)  # {"ok", "missing", "extra", "differing", "events"}
    fence_token = peewee.BigIntegerField(default=0)  # the newest listener run's token (models.fence)

    class Meta:
        table_name = "matches"

    def has_in_game_questions(self) -> bool:
        """Whether at least one in-game question was issued for this match.

        Read through the ``questions`` backref of models.question (which imports this module,
        never the other way round).
        """
        questions = self.questions  # type: ignore[attr-defined]
        return questions.where(questions.model.in_game).exists()

    def apply_refresh(self, incoming: str, *, now: datetime | None = None) -> str:
        """Apply a schedule-refresh status (freeze/heal) and save; return the stored status."""
        now = now or utcnow()
        has_questions = self.has_in_game_questions()
        return self._write_status(
            lambda current: refreshed_status(
                current, incoming, has_in_game_questions=has_questions, scheduled=self.scheduled, now=now
            ),
            always=True,
            sr_status=incoming,
            refreshed_at=now,
        )

    def apply_stream(self, incoming: str, *, fence_token: int | None = None) -> str:
        """Apply a push-stream status (never pregame, never reopen terminal); return it.

        ``fence_token``: the listener run's fencing token (models.fence); a newer one on the match
        refuses the write with FencedWrite.
        """
        return self._write_status(
            lambda current: apply_stream_status(current, incoming), always=False, fence_token=fence_token
        )

    def _write_status(
        self, rule: Callable[[str], str], *, always: bool, fence_token: int | None = None, **extra: Any
    ) -> str:
        """Store ``rule(status)`` by compare-and-set: ``UPDATE … WHERE status = <the status it read>``.

        When another writer changed the status since this object read it, the update matches no
        row; the stored status is read again and the rule applied to it, so a write computed from a
        stale read never rewinds a newer status. ``always``: write ``extra`` even when the status
        stays the same. Returns the stored status.
        """
        for _ in range(_STATUS_WRITE_TRIES):
            old = self.status
            new = rule(old)
            if new == old and not always:
                return new
            now = utcnow()
            query = Match.update(status=new, updated_at=now, **extra)
            fenced = Match.fence_token <= fence_token if fence_token is not None else True
            if query.where(Match.id == self.id, Match.status == old, fenced).execute():
                if new != old:
                    logger.info("match %s status %s -> %s", self.id, old, new)
                self.status, self.updated_at = new, now
                for name, value in extra.items():
                    setattr(self, name, value)
                return new
            row = Match.select(Match.status, Match.fence_token).where(Match.id == self.id).first()
            if row is None:
                return old  # the match was deleted meanwhile
            if fence_token is not None and row.fence_token > fence_token:
                raise FencedWrite(
                    f"match {self.id}: status {new} refused: fencing token {fence_token} is not the newest"
                )
            self.status = row.status
        logger.warning(
            "match %s: status %s kept: other writers changed it at every try", self.id, self.status
        )
        return self.status

    def start_settings_without_metadata(self) -> dict[str, Any]:
        """Return ``listener_start_settings`` minus the bookkeeping keys."""
        return {k: v for k, v in (self.listener_start_settings or {}).items() if k not in METADATA_KEYS}


@translate_database_errors
def create_match(**fields: Any) -> Match:
    """Store a new match of ``fields``; ConstraintViolation when its ``sr_id`` is taken."""
    return Match.create(**fields)


@translate_database_errors
def matches_by_start(limit: int) -> list[Match]:
    """The first ``limit`` matches by start time (then id), each with its league."""
    return list(Match.select(Match, League).join(League).order_by(Match.scheduled, Match.id).limit(limit))


@translate_database_errors
def match_with_league(match_id: uuid.UUID) -> Match | None:
    """Match ``match_id`` with its league, or None."""
    return Match.select(Match, League).join(League).where(Match.id == match_id).first()


def match_label(title: str | None, league: str | None, sr_id: str) -> str:
    """How a person names a match: ``HOU @ KC (mlb)``, or ``sr_id (league)`` when it has no title."""
    name = title or sr_id
    return f"{name} ({league})" if league else name


@translate_database_errors
def match_labels(match_ids: list[str]) -> dict[str, str]:
    """Match id (text) -> its label (``match_label``) for the matches among ``match_ids`` (ids that are
    not a match's, or not UUIDs, left out)."""
    ids = [m for m in match_ids if _is_uuid(m)]
    if not ids:
        return {}
    rows = database.execute_sql(
        "SELECT m.id::text, m.title, l.name, m.sr_id FROM matches m JOIN leagues l ON l.id = m.league_id "
        "WHERE m.id = ANY(%s::uuid[])",
        (ids,),
    ).fetchall()
    return {mid: match_label(title, league, sr_id) for mid, title, league, sr_id in rows}


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


@translate_database_errors
def failed_verification_count() -> int:
    """How many matches' last archive verification failed (``archive_verification.ok`` false)."""
    return database.execute_sql(
        "SELECT count(*) FROM matches WHERE jsonb_typeof(archive_verification) = 'object' "
        "AND archive_verification->'ok' = 'false'::jsonb"
    ).fetchone()[0]


@translate_database_errors
def write_test_match_status(sr_id: str, status: str) -> bool:
    """Set the is_test match ``sr_id``'s status (on a connection of its own) unless its status is
    terminal; whether a row changed."""
    with connection_scope():
        return bool(
            Match.update(status=status, updated_at=utcnow())
            .where(
                (Match.sr_id == sr_id)
                & (Match.is_test == True)  # noqa: E712 - peewee expression
                & (Match.status.not_in(sorted(TERMINAL)))
            )
            .execute()
        )


@translate_database_errors
def mark_test_clone_served(sr_id: str, scheduled: datetime) -> bool:
    """Make the unserved is_test clone ``sr_id`` dispatchable, kick-off at ``scheduled`` (on a
    connection of its own); whether a row changed."""
    with connection_scope():
        cursor = database.execute_sql(
            "UPDATE matches SET listener_start_settings = listener_start_settings - %s::text, "
            "scheduled = %s, updated_at = %s "
            "WHERE sr_id = %s AND is_test AND listener_start_settings ? %s::text",
            (SRSIM_UNSERVED, scheduled, utcnow(), sr_id, SRSIM_UNSERVED),
        )
    return bool(cursor.rowcount)


@translate_database_errors
def register_test_match(*, sr_id: str, league: str, title: str | None, scheduled: datetime) -> bool:
    """Create the is_test match ``sr_id`` (and its league) unless it exists; whether it was created."""
    lg, _ = League.get_or_create(name=league)
    _, made = Match.get_or_create(
        sr_id=sr_id, defaults={"league": lg, "title": title, "scheduled": scheduled, "is_test": True}
    )
    return bool(made)


@translate_database_errors
def update_match_fields(match_id: uuid.UUID, changes: dict[str, Any]) -> None:
    """Write ``changes`` (field -> value) to match ``match_id``, ``updated_at`` now."""
    Match.update(**changes, updated_at=utcnow()).where(Match.id == match_id).execute()


@translate_database_errors
def matches_with_keys_outside(allowed: list[str], *, limit: int) -> list[tuple[str, list[str]]]:
    """(match id, its keys not in ``allowed``) of the first ``limit`` matches, by id, whose
    ``listener_start_settings`` hold such a key."""
    found = database.execute_sql(
        "SELECT m.id::text, array_agg(k ORDER BY k) FROM matches m CROSS JOIN LATERAL "
        "jsonb_object_keys(CASE WHEN jsonb_typeof(m.listener_start_settings) = 'object' "
        "THEN m.listener_start_settings ELSE '{}'::jsonb END) AS k "
        "WHERE NOT (k = ANY(%s)) GROUP BY m.id ORDER BY m.id LIMIT %s",
        (allowed, limit),
    ).fetchall()
    return [(mid, list(keys)) for mid, keys in found]


@translate_database_errors
def match_by_sr_id(sr_id: str) -> Match | None:
    """The match whose provider id is ``sr_id``, or None."""
    return Match.select().where(Match.sr_id == sr_id).first()


@translate_database_errors
def match_by_reference(ref: str) -> Match | None:
    """The match (with its league) whose internal id is ``ref``, else whose sr_id is ``ref``; or None."""
    query = Match.select(Match, League).join(League)
    try:
        internal = uuid.UUID(ref)
    except ValueError:
        internal = None
    if internal is not None:
        found = query.where(Match.id == internal).first()
        if found is not None:
            return found
    return query.where(Match.sr_id == ref).first()


@translate_database_errors
def match_rows_by_league_and_sr_id(
    *, league_id: int | None = None, match_ids: list[str] | None = None, status: str | None = None
) -> list[tuple[str, str, str, str, str | None]]:
    """(id, sr_id, league name, status, title) of the matches of league ``league_id``, among ``match_ids``,
    in ``status`` (each filter None: not filtered), by league name and sr_id."""
    query = Match.select(Match.id, Match.sr_id, Match.status, Match.title, League.name).join(League)
    if league_id is not None:
        query = query.where(League.id == league_id)
    if match_ids is not None:
        query = query.where(Match.id.in_(match_ids))
    if status is not None:
        query = query.where(Match.status == status)
    ordered = query.order_by(League.name, Match.sr_id)
    return [(str(m.id), m.sr_id, m.league.name, m.status, m.title) for m in ordered]


@translate_database_errors
def match_by_id(match_id: uuid.UUID | str) -> Match:
    """Match ``match_id``; MatchNotFound when there is none."""
    match = Match.get_or_none(Match.id == match_id)
    if match is None:
        raise MatchNotFound(f"no match with id {match_id}")
    return match


@translate_database_errors
def status_of_match(match_id: uuid.UUID | str) -> str | None:
    """Match ``match_id``'s status, or None when there is no such match."""
    row = Match.select(Match.status).where(Match.id == match_id).first()
    return None if row is None else row.status


@translate_database_errors
def reschedule_match(match: Match, *, scheduled: datetime, title: str | None) -> None:
    """Write ``match``'s new start time and title (nothing else of it)."""
    match.scheduled, match.title = scheduled, title
    match.save(only=[Match.scheduled, Match.title])

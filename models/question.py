"""Question: an in-game prop issued for a match by the listener pipeline, later settled.

A settled question's ``details`` keep ``settled_by`` (the event id whose message settled it) and
``settlements``, the record of every settle, re-settle (a correction of that event) and reopen (its
delete): ``{"op", "answer", "event_id", "at"}`` each, oldest first.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import peewee
from peewee import EXCLUDED, SQL
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField
from models.boundary import translate_database_errors
from models.db import database
from models.match import Match


class Question(BaseModel):
    """A question issued while a match is live (``in_game``) or before it; settled by events.

    ``status``: ``open`` (accepting answers), ``settled`` (answer known), ``void`` (cancelled).
    """

    id = peewee.UUIDField(primary_key=True, default=uuid.uuid4)
    match = peewee.ForeignKeyField(Match, backref="questions", on_delete="CASCADE")
    key = peewee.TextField()  # idempotency key within the match, "<unit>:<the feed's unit id>"
    prompt = peewee.TextField()
    in_game = peewee.BooleanField(default=True)
    status = peewee.TextField(default="open")
    answer = peewee.TextField(null=True)
    details = BinaryJSONField(default=dict)
    issued_at = UTCDateTimeField(default=utcnow)
    settled_at = UTCDateTimeField(null=True)

    class Meta:
        table_name = "questions"
        indexes = ((("match", "key"), True),)


@translate_database_errors
def issue_question(match_id: str, *, key: str, prompt: str, details: dict[str, Any]) -> None:
    """Store the open in-game question ``key`` of match ``match_id``; one that exists already (settled
    before its start arrived) keeps its answer and gets ``prompt``."""
    Question.insert(match=match_id, key=key, prompt=prompt, in_game=True, details=details).on_conflict(
        conflict_target=[Question.match, Question.key], update={Question.prompt: EXCLUDED.prompt}
    ).execute()


#: What ``settle_question`` and ``reopen_question`` did.
SETTLED, RESETTLED, REOPENED = "settled", "resettled", "reopened"


def _record(op: str, answer: str | None, event_id: str | None, at: datetime) -> dict[str, Any]:
    return {"op": op, "answer": answer, "event_id": event_id, "at": at.isoformat()}


@translate_database_errors
def settle_question(
    match_id: str,
    *,
    key: str,
    answer: str,
    at: datetime,
    prompt: str,
    details: dict[str, Any],
    event_id: str | None = None,
) -> str | None:
    """Settle match ``match_id``'s question ``key`` with ``answer``, settled by event ``event_id``.

    An open question is settled; one not issued yet (its start arrives later, a backfill's order) is
    created settled with ``prompt`` and ``details``; a question settled by this same event with
    another answer (a correction of the event) is settled again. Each is recorded in its
    ``settlements``. Returns SETTLED, RESETTLED, or None when nothing changed (settled already by
    another event, or with this answer: a settle touches only an open question).
    """
    with database.atomic():
        row = (
            Question.select(Question.id, Question.status, Question.answer, Question.details)
            .where((Question.match == match_id) & (Question.key == key))
            .for_update()
            .first()
        )
        if row is None:
            record = _record(SETTLED, answer, event_id, at)
            inserted = (
                Question.insert(
                    match=match_id,
                    key=key,
                    prompt=prompt,
                    in_game=True,
                    status="settled",
                    answer=answer,
                    settled_at=at,
                    details={**details, "settled_by": event_id, "settlements": [record]},
                )
                .on_conflict_ignore()
                .returning(Question.id)
                .execute()
            )
            if list(inserted):
                return SETTLED
            return settle_question(  # a concurrent settle inserted it first: settle that row (a savepoint)
                match_id, key=key, answer=answer, at=at, prompt=prompt, details=details, event_id=event_id
            )
        held = dict(row.details or {})
        if row.status == "open":
            op = SETTLED
        elif (
            row.status == "settled"
            and event_id
            and held.get("settled_by") == event_id
            and row.answer != answer
        ):
            op = RESETTLED
        else:
            return None
        held["settled_by"] = event_id
        held["settlements"] = [*held.get("settlements", []), _record(op, answer, event_id, at)]
        Question.update(status="settled", answer=answer, settled_at=at, details=held).where(
            Question.id == row.id
        ).execute()
        return op


@translate_database_errors
def reopen_question(match_id: str, *, event_id: str, at: datetime) -> str | None:
    """Open again match ``match_id``'s question settled by event ``event_id`` (the event was deleted),
    recorded in its ``settlements``; its key, or None when no question was settled by it."""
    with database.atomic():
        return _reopen(match_id, event_id=event_id, at=at)


def _reopen(match_id: str, *, event_id: str, at: datetime) -> str | None:
    row = (
        Question.select(Question.id, Question.key, Question.details)
        .where(
            (Question.match == match_id)
            & (Question.status == "settled")
            & (SQL("details->>'settled_by'") == event_id)
        )
        .for_update()
        .first()
    )
    if row is None:
        return None
    held = dict(row.details or {})
    held.pop("settled_by", None)
    held["settlements"] = [*held.get("settlements", []), _record(REOPENED, None, event_id, at)]
    Question.update(status="open", answer=None, settled_at=None, details=held).where(
        Question.id == row.id
    ).execute()
    return str(row.key)


@translate_database_errors
def apply_question_ops(match_id: str, ops: list[dict[str, Any]]) -> list[str | None]:
    """Apply issues, settles and reopens of match ``match_id`` in order, in one call (the caller's
    transaction; migration 0080's ``kickoff_question_ops``), each exactly as ``issue_question``,
    ``settle_question`` and ``reopen_question`` do. An op is ``{"op": "issue", "key", "prompt",
    "details"}``, ``{"op": "settle", "key", "answer", "at" (ISO 8601), "prompt", "details",
    "event_id"}`` or ``{"op": "reopen", "event_id", "at"}``; the result per op is what those functions
    return (None for an issue)."""
    if not ops:
        return []
    text = json.dumps(ops, separators=(",", ":"), default=str)
    (results,) = database.execute_sql(
        "SELECT kickoff_question_ops(%s::uuid, %s::jsonb)", (str(match_id), text)
    ).fetchone()
    return list(results if not isinstance(results, str) else json.loads(results))


#: Questions of one match the card shows (the newest issued; a game issues hundreds).
CARD_QUESTIONS = 50


@translate_database_errors
def match_questions(match_id: str, *, limit: int = CARD_QUESTIONS) -> list[Question]:
    """Match ``match_id``'s questions, the newest issued first (the match card's list), at most ``limit``."""
    return list(
        Question.select()
        .where(Question.match == match_id)
        .order_by(Question.issued_at.desc(), Question.key)
        .limit(limit)
    )


@translate_database_errors
def question_counts(match_id: str) -> dict[str, int]:
    """How many questions match ``match_id`` has, by status (``open``, ``settled``, ``void``)."""
    rows = (
        Question.select(Question.status, peewee.fn.COUNT(Question.id))
        .where(Question.match == match_id)
        .group_by(Question.status)
        .tuples()
    )
    return {str(status): int(n) for status, n in rows}

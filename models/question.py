"""Question: an in-game prop issued for a match by the listener pipeline, later settled."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import peewee
from peewee import EXCLUDED
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField
from models.boundary import translate_database_errors
from models.match import Match


class Question(BaseModel):
    """A question issued while a match is live (``in_game``) or before it; settled by events.

    ``status``: ``open`` (accepting answers), ``settled`` (answer known), ``void`` (cancelled).
    """

    id = peewee.UUIDField(primary_key=True, default=uuid.uuid4)
    match = peewee.ForeignKeyField(Match, backref="questions", on_delete="CASCADE")
    key = peewee.TextField()  # idempotency key within the match, e.g. "atbat:<event id>"
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


@translate_database_errors
def settle_question(
    match_id: str,
    *,
    key: str,
    answer: str,
    at: datetime,
    may_precede: bool,
    prompt: str,
    details: dict[str, Any],
) -> None:
    """Settle match ``match_id``'s open question ``key`` with ``answer`` at ``at``; ``may_precede``: it
    may not exist yet (then it is created settled, with ``prompt`` and ``details``)."""
    if may_precede:
        Question.insert(
            match=match_id,
            key=key,
            prompt=prompt,
            in_game=True,
            status="settled",
            answer=answer,
            settled_at=at,
            details=details,
        ).on_conflict(
            conflict_target=[Question.match, Question.key],
            update={Question.status: "settled", Question.answer: answer, Question.settled_at: at},
            where=(Question.status == "open"),
        ).execute()
    else:
        Question.update(status="settled", answer=answer, settled_at=at).where(
            (Question.match == match_id) & (Question.key == key) & (Question.status == "open")
        ).execute()

"""Question: an in-game prop issued for a match by the listener pipeline, later settled."""

from __future__ import annotations

import uuid

import peewee
from playhouse.postgres_ext import BinaryJSONField

from config.clock import utcnow
from models.base import BaseModel, UTCDateTimeField
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

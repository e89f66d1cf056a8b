"""Fencing tokens: each listener run of a match takes the next one, and the store refuses older ones' writes.

A run takes its token (``take_token``: ``matches.fence_token + 1``, in the transaction that inserts
its open row, which keeps it in ``match_listener_records.fence_token``). Every write the run makes
carries it and is refused by PostgreSQL itself when the match's token is newer: in the same
statement (``is_current`` on the match row, ``row_is_current`` on a lifecycle row) or, for the
writes one statement cannot guard (an INSERT … ON CONFLICT), under the match row's share lock
(``fenced``), which the successor's ``take_token`` must wait for. A token of None (a dry run
without a row, a body run outside the lifecycle) is never fenced.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import peewee

from models.db import database
from models.errors import FencedWrite, MatchNotFound
from models.match import Match

#: Seconds a session may sit idle inside ``fenced`` before PostgreSQL ends it (a paused writer).
IDLE_SECONDS = 5


def _uuid(match_id: object) -> uuid.UUID:
    return match_id if isinstance(match_id, uuid.UUID) else uuid.UUID(str(match_id))


def take_token(match_id: str) -> int:
    """The next fencing token of a match (one UPDATE … RETURNING; call it inside the row's transaction)."""
    query = (
        Match.update(fence_token=Match.fence_token + 1)
        .where(Match.id == _uuid(match_id))
        .returning(Match.fence_token)
    )
    row = next(iter(query.execute()), None)
    if row is None:
        raise MatchNotFound(f"no match with id {match_id}")
    return int(row.fence_token)


def current_token(match: peewee.Node) -> peewee.Node:
    """SQL: the current token of the match ``match`` (a value or a column, e.g. a row's match_id)."""
    return Match.select(Match.fence_token).where(Match.id == match)


def is_current(token: int | None) -> peewee.Expression | bool:
    """SQL condition of a statement on ``matches``: ``token`` is still the match's newest (None: True).

    On the updated row itself, so PostgreSQL re-checks it against a successor's concurrent
    ``take_token`` before it writes.
    """
    if token is None:
        return True
    return Match.fence_token <= token


def row_is_current(record: type[peewee.Model]) -> peewee.Expression:
    """SQL condition on lifecycle rows: the row's run still holds its match's newest token (or has none)."""
    fence = record.fence_token  # type: ignore[attr-defined]
    return fence.is_null() | (fence >= current_token(record.match))  # type: ignore[attr-defined]


def refused(match_id: str, token: int | None, what: str) -> FencedWrite:
    """The error of a write ``token`` may no longer make."""
    return FencedWrite(f"match {match_id}: {what} refused: fencing token {token} is no longer the newest")


@contextlib.contextmanager
def fenced(match_id: str, token: int | None, *, what: str) -> Iterator[None]:
    """A transaction in which ``token`` is checked under the match row's share lock (FencedWrite if older).

    The lock is held until the block's writes commit, so a successor's ``take_token`` waits for
    them: the check and the writes are one step with respect to it.
    """
    if token is None:
        yield
        return
    with database.atomic():
        # A process paused inside this transaction must not hold the lock (and its successor's
        # take_token) for as long as it is paused: PostgreSQL ends such a session, and its writes.
        database.execute_sql(f"SET LOCAL idle_in_transaction_session_timeout = '{IDLE_SECONDS}s'")
        row = (
            Match.select(Match.fence_token).where(Match.id == _uuid(match_id)).for_update("FOR SHARE").first()
        )
        if row is not None and int(row.fence_token) > token:
            raise refused(match_id, token, what)
        yield

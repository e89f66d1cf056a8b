"""The store of ``console_sign_in_refusals``: the only module with SQL on refused console sign-ins.

A row is one refused sign-in counted in one bucket (``account:<digest>``, ``address:<client>``);
the console's throttle counts a bucket's rows of the last window, every API process alike, and an
operator deletes a bucket's rows to lift its lock (``kickoff console unlock``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from models.boundary import translate_database_errors
from models.db import database

#: How long rows are kept at all (far past any window): older ones go as new ones are written.
KEPT_FOR = timedelta(hours=1)


@dataclass(frozen=True)
class Lockout:
    """A bucket with refusals in the window: how many, the newest, and the key it is (when known)."""

    bucket: str
    refusals: int
    last_refused_at: datetime
    key_name: str | None = None  # an account bucket of a stored key (revoked, or not a console scope)


@translate_database_errors
def recent_counts(buckets: Sequence[str], *, since: datetime) -> dict[str, int]:
    """Bucket -> its refusals after ``since`` (buckets without any are left out)."""
    rows = database.execute_sql(
        "SELECT bucket, count(*) FROM console_sign_in_refusals WHERE bucket = ANY(%s) AND refused_at > %s "
        "GROUP BY bucket",
        (list(buckets), since),
    ).fetchall()
    return {bucket: int(n) for bucket, n in rows}


@translate_database_errors
def nth_newest(bucket: str, n: int, *, since: datetime) -> datetime | None:
    """When the ``n``-th newest refusal of ``bucket`` after ``since`` was (None: fewer than ``n``)."""
    row = database.execute_sql(
        "SELECT refused_at FROM console_sign_in_refusals WHERE bucket = %s AND refused_at > %s "
        "ORDER BY refused_at DESC OFFSET %s LIMIT 1",
        (bucket, since, n - 1),
    ).fetchone()
    return None if row is None else row[0]


@translate_database_errors
def record_refusal(buckets: Sequence[str], *, at: datetime) -> None:
    """Count one refused sign-in in each of ``buckets``; rows older than KEPT_FOR are deleted."""
    with database.atomic():
        database.execute_sql("DELETE FROM console_sign_in_refusals WHERE refused_at < %s", (at - KEPT_FOR,))
        for bucket in buckets:
            database.execute_sql(
                "INSERT INTO console_sign_in_refusals (bucket, refused_at) VALUES (%s, %s)", (bucket, at)
            )


@translate_database_errors
def lockouts(*, since: datetime, at_least: int) -> list[Lockout]:
    """The buckets with ``at_least`` refusals after ``since``, most refused first."""
    rows = database.execute_sql(
        "SELECT r.bucket, count(*), max(r.refused_at), min(k.name) FROM console_sign_in_refusals r "
        "LEFT JOIN api_keys k ON r.bucket = 'account:' || left(k.key_hash, 16) "
        "WHERE r.refused_at > %s GROUP BY r.bucket HAVING count(*) >= %s ORDER BY count(*) DESC, r.bucket",
        (since, at_least),
    ).fetchall()
    return [Lockout(*row) for row in rows]


@translate_database_errors
def clear(bucket: str | None) -> int:
    """Delete the refusals of ``bucket`` (None: of every bucket); how many rows went."""
    with database.atomic():
        if bucket is None:
            cursor = database.execute_sql("DELETE FROM console_sign_in_refusals")
        else:
            cursor = database.execute_sql("DELETE FROM console_sign_in_refusals WHERE bucket = %s", (bucket,))
    return int(cursor.rowcount)

"""Issue 35: no act without its record. An operator's sweep, dispatch or backfill writes its audit entry
before it acts, so an entry PostgreSQL refuses refuses the act: nothing is closed or sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from models.db import database
from models.listener_record import MatchListenerRecord
from tests.lifecycle.helpers import dead_run


@pytest.fixture
def audit_refuses() -> Iterator[callable]:
    """``audit_refuses(action)``: PostgreSQL refuses every new audit entry of ``action`` (a check
    constraint, dropped after the test) - an audit insert that fails as a full disk or a lost
    connection would."""
    added: list[str] = []

    def refuse(action: str) -> None:
        name = f"test_refuse_{action.replace('.', '_')}"
        database.execute_sql(
            f"ALTER TABLE audit_log ADD CONSTRAINT {name} CHECK (action <> '{action}') NOT VALID"
        )
        added.append(name)

    yield refuse
    for name in added:
        database.execute_sql(f"ALTER TABLE audit_log DROP CONSTRAINT IF EXISTS {name}")


def test_a_sweep_whose_entry_cannot_be_written_closes_nothing(kick, make_match, lcoordination, audit_refuses):
    match = make_match(status="inprogress")
    record_id = dead_run(match, lcoordination, age_seconds=600)
    audit_refuses("listeners.sweep")
    kick("listeners", "sweep", "--reason", "tidy", code=1)
    assert MatchListenerRecord.get_by_id(record_id).ended_at is None  # the dead run was left as it was


def test_a_dispatch_whose_entry_cannot_be_written_sends_no_start(
    kick, make_match, lcoordination, audit_refuses
):
    match = make_match(status="inprogress")
    audit_refuses("listeners.dispatch")
    kick("listeners", "dispatch", "--reason", "now", code=1)
    assert not lcoordination.barriers.is_pending(match.id)  # no start was claimed, so none was sent
    kick("listeners", "dispatch", "--within-minutes", "0", "--reason", "now", code=1)
    assert not lcoordination.barriers.is_pending(match.id)

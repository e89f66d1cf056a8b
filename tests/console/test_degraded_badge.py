"""The "degraded" badge: an open run whose event log writing is behind shows it, with a title saying what
it means, on the listener board, the Matches board and the match card; another run does not."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest

from config.clock import utcnow
from models.listener_record import MatchListenerRecord

pytestmark = pytest.mark.services

BADGE = re.compile(r'<span class="badge badge-degraded" title="([^"]+)">degraded</span>')


def _row_of(page: str, match_id: str) -> str:
    """The board's ``<tr>`` of ``match_id``."""
    found = re.search(rf'<tr data-match-id="{match_id}".*?</tr>', page, re.S)
    assert found, f"no row of {match_id}"
    return found.group(0)


def test_a_degraded_run_shows_the_badge_with_its_explanation_on_both_boards_and_its_card(
    console_server, console_keys, signed_in, make_match, coordination
):
    behind = make_match("nfl", sr_id="sr:match:behind", status="inprogress", scheduled=utcnow())
    fine = make_match("nfl", sr_id="sr:match:fine", status="inprogress", scheduled=utcnow())
    # heartbeats an hour ahead stay fresh under the server's short test intervals: both runs are Running
    runs = {}
    for match in (behind, fine):
        runs[match.id] = str(uuid.uuid4())
        MatchListenerRecord.create(
            id=runs[match.id], match=match.id, heartbeat_at=utcnow() + timedelta(hours=1)
        )
    coordination.locks.flag_degraded_runs([runs[behind.id]], [], ttl_seconds=600)  # as its heartbeat sets it
    op = signed_in(console_keys["read"])

    for path in ("/", "/matches"):
        page = op.client.get(path).text
        row = _row_of(page, str(behind.id))
        [title] = BADGE.findall(row)
        assert 'data-badge="Running"' in row and "event log writing is behind" in title
        assert "PostgreSQL" in title
        assert not BADGE.search(_row_of(page, str(fine.id))), path
    assert BADGE.search(op.client.get(f"/matches/{behind.id}").text)
    assert not BADGE.search(op.client.get(f"/matches/{fine.id}").text)

    coordination.locks.flag_degraded_runs([], [runs[behind.id]], ttl_seconds=600)  # it caught up
    assert not BADGE.search(_row_of(op.client.get("/").text, str(behind.id)))
    assert not BADGE.search(_row_of(op.client.get("/matches").text, str(behind.id)))

"""A match named by its internal id or its sr_id, also when the sr_id is a UUID (lifecycle.match_ref)."""

from __future__ import annotations

import json
import uuid

import pytest

from lifecycle.match_ref import resolve_match_id
from models.errors import MatchNotFound
from models.listener_record import MatchListenerRecord
from tests.lifecycle.helpers import reload


@pytest.fixture
def uuid_match(make_match):
    """A match whose sr_id is a UUID other than its internal id (as the provider's game ids are)."""
    return make_match(sr_id=str(uuid.uuid4()), status="inprogress")


def test_the_resolver_takes_the_internal_id_first_then_the_sr_id(make_match, uuid_match):
    assert resolve_match_id(str(uuid_match.id)) == str(uuid_match.id)
    assert resolve_match_id(uuid_match.sr_id) == str(uuid_match.id)
    assert resolve_match_id(f"  {uuid_match.sr_id}  ") == str(uuid_match.id)
    # A match whose sr_id is another match's internal id: the internal id wins.
    make_match(sr_id=str(uuid_match.id))
    assert resolve_match_id(str(uuid_match.id)) == str(uuid_match.id)
    with pytest.raises(MatchNotFound, match="no match with id or sr_id"):
        resolve_match_id(str(uuid.uuid4()))


def test_listeners_stop_with_a_uuid_sr_id_stops_that_match(kick, uuid_match):
    record = MatchListenerRecord.create(id=str(uuid.uuid4()), match=uuid_match.id)
    out = json.loads(kick("listeners", "stop", uuid_match.sr_id, "--reason", "drill", "--json").output)
    assert out["match_id"] == str(uuid_match.id) and out["rows_closed"] == 1
    assert MatchListenerRecord.get_by_id(record.id).exit_code == 15
    assert reload(uuid_match).auto_dispatch_listener is False


@pytest.mark.parametrize(
    "args",
    [
        ("matches", "show", "{ref}", "--json"),
        ("matches", "set-dispatch", "{ref}", "off", "--json"),
        ("matches", "edit", "{ref}", "--title", "renamed", "--json"),
        ("listeners", "status", "--match", "{ref}", "--json"),
        ("listeners", "start", "{ref}", "--json"),
        ("enqueue", "start_match_listener", "--kw", "match_id={ref}", "--json"),
    ],
    ids=["matches-show", "set-dispatch", "matches-edit", "listeners-status", "listeners-start", "enqueue"],
)
def test_every_match_argument_takes_a_uuid_sr_id(kick, uuid_match, broker_queues, args):
    out = json.loads(kick(*(a.format(ref=uuid_match.sr_id) for a in args)).output)
    named = out.get("match_id") or out.get("id") or out.get("kwargs", {}).get("match_id")
    if named is None:
        [entry] = out["matches"]
        named = entry["match_id"]
    assert named == str(uuid_match.id)

"""The audit log from the console: sign-in, a refused one, a stop with its reason, sign-out."""

from __future__ import annotations

import uuid

import httpx
import pytest

from models.audit import audit_entries
from models.db import database
from models.listener_record import MatchListenerRecord

pytestmark = pytest.mark.services


def test_console_acts_name_the_key_and_a_stop_needs_a_reason(
    console_server, console_keys, signed_in, make_match
):
    match = make_match(status="inprogress")
    record = MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    with httpx.Client(base_url=console_server.url, timeout=60) as stranger:
        assert stranger.post("/sign-in", data={"api_key": "kk_nope", "next": "/"}).status_code == 401
    op = signed_in(console_keys["operator"])
    as_json = {"X-CSRF-Token": op.csrf, "Accept": "application/json"}
    refused = op.client.post(f"/matches/{match.id}/stop", data={"reason": "  "}, headers=as_json)
    assert refused.status_code == 422 and "reason" in refused.json()["message"], refused.text
    assert MatchListenerRecord.get_by_id(record.id).ended_at is None
    stopped = op.client.post(f"/matches/{match.id}/stop", data={"reason": "pitch invasion"}, headers=as_json)
    assert stopped.status_code == 200 and stopped.json()["ok"] is True, stopped.text
    forced = op.client.post(f"/matches/{match.id}/start", data={"force": "1"}, headers=as_json)
    assert forced.status_code == 422, forced.text
    assert op.client.post("/sign-out", headers={"X-CSRF-Token": op.csrf}).status_code == 303

    actions = [(e.action, e.who, e.reason) for e in reversed(audit_entries())]
    assert actions == [
        ("console.sign_in", "console-operator", None),
        ("listener.stop", "console-operator", "pitch invasion"),
        ("console.sign_out", "console-operator", None),
    ]
    stop = audit_entries(action="listener.stop")[0]
    assert stop.target == f"match:{match.id}" and stop.request_id and stop.who_key_id


def test_the_audit_page_filters_and_escapes(console_keys, signed_in, make_match):
    from models.audit import Actor, record_audit

    one, two = make_match(), make_match()
    bot = Actor.api_key(str(uuid.uuid4()), "bot")
    record_audit(
        actor=bot, action="match.edit", target_kind="match", target_id=str(one.id), reason="<b>bold</b>"
    )
    record_audit(
        actor=Actor.cli(), action="run.cancel", target_kind="run", target_id="r1", after={"x": "<i>"}
    )
    record_audit(actor=bot, action="match.edit", target_kind="match", target_id=str(two.id))
    rd = signed_in(console_keys["read"])
    page = rd.client.get("/audit").text
    assert page.count('data-action="match.edit"') == 2 and 'data-action="run.cancel"' in page
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page and "<i>" not in page
    assert '<a href="/audit">Audit</a>' in page
    mine = rd.client.get("/audit", params={"who": "bot", "match": two.sr_id}).text
    assert mine.count("data-action=") == 1 and str(two.id) in mine
    assert "data-action=" not in rd.client.get("/audit", params={"action": "listener.stop"}).text
    bad = rd.client.get("/audit", params={"since": "yesterday"})
    assert bad.status_code == 200 and "not an ISO 8601 time" in bad.text and "data-action=" not in bad.text
    assert "data-action=" not in rd.client.get("/audit", params={"since": "2999-01-01T00:00:00Z"}).text


@pytest.mark.parametrize(
    "reason",
    [pytest.param("stop\x00now", id="nul"), pytest.param("x" * 2001, id="too-long")],
)
def test_a_stop_whose_reason_breaks_the_text_rule_is_refused_before_it_stops(
    console_keys, signed_in, make_match, reason
):
    match = make_match(status="inprogress")
    record = MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    op = signed_in(console_keys["operator"])
    as_json = {"X-CSRF-Token": op.csrf, "Accept": "application/json"}
    refused = op.client.post(f"/matches/{match.id}/stop", data={"reason": reason}, headers=as_json)
    assert refused.status_code == 422, refused.text
    assert MatchListenerRecord.get_by_id(record.id).ended_at is None  # not stopped
    assert audit_entries(action="listener.stop") == []
    bulk = op.client.post(
        "/board/bulk/confirm",
        data={"action": "stop", "match_ids": [str(match.id)], "reason": reason, "confirm": "x"},
        headers={"X-CSRF-Token": op.csrf},
    )
    assert bulk.status_code == 422, bulk.text
    assert MatchListenerRecord.get_by_id(record.id).ended_at is None


def test_a_guessed_key_writes_no_audit_entry_but_a_stored_key_refused_does(console_server, console_keys):
    """Issue 35: a refused sign-in of a key nobody holds is counted and logged, never an undeletable
    audit entry per guess; a stored key refused (a trigger key) is that key's act and is audited."""
    with httpx.Client(base_url=console_server.url, timeout=60) as client:
        for n in range(3):
            assert client.post("/sign-in", data={"api_key": f"kk_guess-{n}"}).status_code == 401
        assert client.post("/sign-in", data={"api_key": console_keys["trigger"]}).status_code == 401
    entries = audit_entries()
    assert [(e.action, e.who) for e in entries] == [("console.sign_in_failed", "console-trigger")]
    [[counted]] = database.execute_sql("SELECT count(*) FROM console_sign_in_refusals").fetchall()
    assert counted == 4  # each refusal counted (per key: no trusted address here)

"""The board's bulk action over HTTP: preview (nothing changes), confirm (exactly the previewed), refusals."""

from __future__ import annotations

import re

import pytest

from models import Match
from models.audit import audit_entries

pytestmark = pytest.mark.services

CONFIRM_IN_PAGE = re.compile(r'name="confirm" value="([^"]+)"')


def _form(csrf: str | None, **fields: str) -> dict[str, str]:
    data = {"action": "dispatch-off", "league": "conb", "status": "inprogress", "reason": "drill", **fields}
    return {**data, "csrf_token": csrf} if csrf else data


def test_preview_then_confirm_acts_on_exactly_the_previewed_matches(
    console_server, console_keys, signed_in, make_match
):
    first = make_match("conb", status="inprogress")
    second = make_match("conb", status="inprogress")
    make_match("conb", status="closed")
    op = signed_in(console_keys["operator"])
    board = op.client.get("/", params={"league": "conb"})
    assert 'action="/board/bulk"' in board.text and '<option value="conb" selected>' in board.text

    preview = op.client.post("/board/bulk", data=_form(op.csrf, reason="<b>drill</b>"))
    assert preview.status_code == 200, preview.text
    html = preview.text
    assert "2 matches fit the filter" in html and first.sr_id in html and second.sr_id in html
    assert "&lt;b&gt;drill&lt;/b&gt;" in html and "<b>drill</b>" not in html  # the reason is escaped
    confirm = CONFIRM_IN_PAGE.search(html).group(1)
    assert Match.get_by_id(first.id).auto_dispatch_listener  # a preview changes nothing
    assert audit_entries(action="listeners.bulk") == []

    joined = make_match("conb", status="inprogress")  # joins the filter after the preview
    done = op.client.post("/board/bulk/confirm", data=_form(op.csrf, confirm=confirm))
    assert done.status_code == 200, done.text
    assert "2 done, 0 failed" in done.text
    assert re.findall(r'<tr data-match-id="([^"]+)" data-ok="true">', done.text) == sorted(
        [str(first.id), str(second.id)], key=lambda mid: Match.get_by_id(mid).sr_id
    )
    assert not Match.get_by_id(first.id).auto_dispatch_listener
    assert not Match.get_by_id(second.id).auto_dispatch_listener
    assert Match.get_by_id(joined.id).auto_dispatch_listener
    [whole] = audit_entries(action="listeners.bulk")
    assert whole.who.startswith("console-operator") and whole.reason == "drill"

    again = op.client.post("/board/bulk/confirm", data=_form(op.csrf, confirm=confirm))
    assert again.status_code == 409 and "already used" in again.text


def test_refusals_no_csrf_no_reason_a_read_session(console_server, console_keys, signed_in, make_match):
    match = make_match("conb", status="inprogress")
    op = signed_in(console_keys["operator"])
    assert op.client.post("/board/bulk", data=_form(None)).status_code == 403
    blank = op.client.post("/board/bulk", data=_form(op.csrf, reason="  "))
    assert blank.status_code == 422 and "needs a reason" in blank.text
    forged = op.client.post("/board/bulk/confirm", data=_form(op.csrf, confirm="x" * 43))
    assert forged.status_code == 409
    rd = signed_in(console_keys["read"])
    assert 'action="/board/bulk"' not in rd.client.get("/").text
    assert rd.client.post("/board/bulk", data=_form(rd.csrf)).status_code == 403
    assert Match.get_by_id(match.id).auto_dispatch_listener

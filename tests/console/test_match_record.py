"""The match card's record of the game: its events from the event log, newest first, paged, by type."""

from __future__ import annotations

import re

from models.event_log import pages_of
from tests.logged import event_log_of

ROW = re.compile(r'<tr data-seq="(\d+)" data-kind="(\w+)">')


def _event(event_id: str, kind: str, version: str, *, op: str = "create", backfilled: bool = False) -> dict:
    message = {
        "payload": {"event": {"id": event_id, "type": kind, "updated_at": version}},
        "metadata": {"operation": op, "event_category": kind},
    }
    if backfilled:
        message["kickoff"] = {"backfilled": "play_by_play", "at": version}
    return message


def test_the_card_lists_the_event_log_newest_first_with_backfills_corrections_and_deletes(
    console_server, console_keys, signed_in, make_match
):
    match = make_match("mlb", sr_id="sr:match:record")
    messages = [
        _event("e1", "pitch", "2026-01-01T00:00:01Z"),
        _event("e2", "atbat", "2026-01-01T00:00:02Z"),
        _event("e1", "pitch", "2026-01-01T00:00:03Z", op="update", backfilled=True),
        _event("e2", "atbat", "2026-01-01T00:00:04Z", op="delete"),
        *(_event(f"p{n}", "pitch", f"2026-01-01T00:01:{n:02d}Z") for n in range(55)),
    ]
    event_log_of(match.id, messages).close()
    logged = [row for page in pages_of(match.id) for row in page]
    rd = signed_in(console_keys["read"])

    card = rd.client.get(f"/matches/{match.id}").text
    shown = [(int(seq), kind) for seq, kind in ROW.findall(card)]
    newest = [(r.seq, r.kind) for r in reversed(logged)]
    assert shown == newest[:50]  # one page, newest first, as the log holds them
    older = re.search(r'href="/matches/[^"?]+\?before=(\d+)#record">Older events', card)
    assert older is not None
    rest = rd.client.get(f"/matches/{match.id}?before={older.group(1)}").text
    assert [(int(s), k) for s, k in ROW.findall(rest)] == newest[50:]

    by_type = rd.client.get(f"/matches/{match.id}?type=atbat").text
    e2_create, e1_fix, e2_delete = logged[1], logged[2], logged[3]
    assert [int(s) for s, _ in ROW.findall(by_type)] == [e2_delete.seq, e2_create.seq]
    assert f"delete of #{e2_create.seq}" in by_type
    page = rd.client.get(f"/matches/{match.id}?before={e2_delete.seq}").text
    assert (e1_fix.seq, "backfilled") in [(int(s), k) for s, k in ROW.findall(page)]
    assert f"correction of #{logged[0].seq} (version 2026-01-01T00:00:03Z)" in page
    assert "<summary>raw</summary>" in page  # the message one click away, escaped
    assert re.search(r"&#34;id&#34;: ?&#34;e1&#34;", page)


def test_a_bad_page_or_type_is_said_on_the_card_not_a_500(
    console_server, console_keys, signed_in, make_match
):
    match = make_match("mlb", sr_id="sr:match:record-bad")
    event_log_of(match.id, [_event("e1", "pitch", "2026-01-01T00:00:01Z")]).close()
    rd = signed_in(console_keys["read"])
    for query, said in (
        ("before=abc", "is not a row number"),
        ("before=99999999999999999999999", "is not a row number"),
        ("before=%C2%B2", "is not a row number"),  # a digit to str.isdigit, not to int()
        ("type=%3Cscript%3E", "no event of type"),
    ):
        answer = rd.client.get(f"/matches/{match.id}?{query}")
        assert answer.status_code == 200 and said in answer.text, query
        assert "<script>" not in answer.text
        assert len(ROW.findall(answer.text)) == 1


QUESTION = re.compile(r'<tr data-key="([^"]+)" data-status="(\w+)">')


def test_the_card_lists_the_questions_issued_and_settled_with_each_settle_escaped(
    console_server, console_keys, signed_in, make_match
):
    from datetime import UTC, datetime

    from models.question import issue_question, reopen_question, settle_question

    match = make_match("mlb", sr_id="sr:match:questions")
    at = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    issue_question(str(match.id), key="atbat:1", prompt="Hit <b>or</b> out?", details={})
    issue_question(str(match.id), key="atbat:2", prompt="Strikeout?", details={})
    settle_question(str(match.id), key="atbat:2", answer="yes", at=at, prompt="", details={}, event_id="e9")
    settle_question(str(match.id), key="atbat:2", answer="no", at=at, prompt="", details={}, event_id="e9")
    issue_question(str(match.id), key="atbat:3", prompt="Walk?", details={})
    settle_question(str(match.id), key="atbat:3", answer="yes", at=at, prompt="", details={}, event_id="e7")
    reopen_question(str(match.id), event_id="e7", at=at)

    card = signed_in(console_keys["read"]).client.get(f"/matches/{match.id}").text
    shown = sorted(QUESTION.findall(card))
    assert shown == [("atbat:1", "open"), ("atbat:2", "settled"), ("atbat:3", "open")]
    assert "Hit &lt;b&gt;or&lt;/b&gt; out?" in card and "<b>or</b>" not in card
    assert "by event <code>e9</code>" in card and "settled (yes), resettled (no)" in card
    assert "settled (yes), reopened" in card
    assert "<summary>3 questions (2 open, 1 settled)</summary>" in card  # folded: a game issues hundreds
    empty = signed_in(console_keys["read"]).client.get(f"/matches/{make_match('mlb').id}").text
    assert "No question issued for this game." in empty

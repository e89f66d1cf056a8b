"""POST /v1/listeners/bulk: a dry run changes nothing; the confirm acts on exactly the previewed set."""

from __future__ import annotations

import hashlib

from models import Match
from models.audit import audit_entries
from tests.waiting import wait_for

URL = "/v1/listeners/bulk"


def _body(action: str, league: str, **extra: object) -> dict[str, object]:
    return {"action": action, "filter": {"league": league}, "reason": "drill", **extra}


def test_a_dry_run_changes_nothing_and_the_confirm_acts_on_exactly_the_previewed_matches(
    api, make_match, coordination
):
    first = make_match("bulkl", status="inprogress")
    second = make_match("bulkl", status="inprogress")
    make_match("bulkl", status="closed")  # another status: not in the filter
    make_match("other", status="inprogress")  # another league
    body = {
        "action": "dispatch-off",
        "filter": {"league": "bulkl", "status": "inprogress"},
        "reason": "drill",
    }
    preview = api.post(URL, json={**body, "dry_run": True})
    assert preview.status_code == 200, preview.text
    seen = preview.json()
    assert seen["count"] == 2 and sorted(seen["match_ids"]) == sorted([str(first.id), str(second.id)])
    assert seen["confirm"] and seen["filter"]["league"] == "bulkl"
    assert all(Match.get_by_id(m.id).auto_dispatch_listener for m in (first, second))  # nothing changed
    assert audit_entries(action="listeners.bulk") == []

    joined = make_match("bulkl", status="inprogress")  # joins the filter after the preview
    done = api.post(URL, json={**body, "confirm": seen["confirm"]})
    assert done.status_code == 200, done.text
    results = done.json()["results"]
    assert [r["match_id"] for r in results] == seen["match_ids"]
    assert all(r["ok"] for r in results) and done.json()["failed"] == 0
    assert not Match.get_by_id(first.id).auto_dispatch_listener
    assert not Match.get_by_id(second.id).auto_dispatch_listener
    assert Match.get_by_id(joined.id).auto_dispatch_listener  # not previewed: not acted on

    [whole] = audit_entries(action="listeners.bulk")
    assert whole.after["match_ids"] == seen["match_ids"] and whole.reason == "drill"
    assert whole.target_kind == "filter" and '"league":"bulkl"' in whole.target_id
    per_match = audit_entries(action="match.dispatch_off")
    assert sorted(e.target_id for e in per_match) == sorted(seen["match_ids"])
    assert {e.reason for e in per_match} == {"drill"} and {e.who for e in per_match} == {whole.who}

    again = api.post(URL, json={**body, "confirm": seen["confirm"]})  # a confirm is used once
    assert again.status_code == 409 and again.json()["field"] == "confirm"


def test_a_stop_in_bulk_reports_a_match_deleted_since_the_preview_as_its_own_error(
    api, make_match, coordination
):
    kept = make_match("bulks", status="inprogress")
    gone = make_match("bulks", status="inprogress")
    preview = api.post(URL, json=_body("stop", "bulks", dry_run=True)).json()
    assert preview["count"] == 2
    Match.delete_by_id(gone.id)
    done = api.post(URL, json=_body("stop", "bulks", confirm=preview["confirm"]))
    assert done.status_code == 200, done.text
    by_id = {r["match_id"]: r for r in done.json()["results"]}
    assert by_id[str(kept.id)]["ok"] and "stopped" in by_id[str(kept.id)]["detail"]
    assert not by_id[str(gone.id)]["ok"] and "no match" in by_id[str(gone.id)]["detail"]
    assert done.json()["failed"] == 1
    assert [e.target_id for e in audit_entries(action="listener.stop")] == [str(kept.id)]


def test_a_bulk_start_enqueues_each_previewed_match(api, make_match, coordination):
    match = make_match("bulkst", status="scheduled")
    preview = api.post(URL, json=_body("start", "bulkst", dry_run=True)).json()
    done = api.post(URL, json=_body("start", "bulkst", confirm=preview["confirm"]))
    assert done.status_code == 200 and done.json()["results"][0]["ok"], done.text
    assert coordination.barriers.is_pending(str(match.id))


def test_a_tampered_expired_or_foreign_confirm_is_refused_and_changes_nothing(api, make_match, coordination):
    match = make_match("bulkt", status="inprogress")
    fresh = lambda: api.post(URL, json=_body("dispatch-off", "bulkt", dry_run=True)).json()["confirm"]  # noqa: E731

    token = fresh()
    tampered = ("A" if token[0] != "A" else "B") + token[1:]
    refused = api.post(URL, json=_body("dispatch-off", "bulkt", confirm=tampered))
    assert refused.status_code == 409 and refused.json()["field"] == "confirm", refused.text

    kept = fresh()
    other_action = api.post(URL, json=_body("stop", "bulkt", confirm=kept))
    assert other_action.status_code == 409 and "another action or filter" in other_action.json()["error"]
    key = coordination.bulk_preview_key(hashlib.sha256(kept.encode()).hexdigest())
    assert coordination.client.exists(key)  # a wrong confirm does not use up the preview
    other_filter = {**_body("dispatch-off", "bulkt"), "filter": {"league": "bulkt", "status": "closed"}}
    assert api.post(URL, json={**other_filter, "confirm": fresh()}).status_code == 409

    expiring = fresh()
    key = coordination.bulk_preview_key(hashlib.sha256(expiring.encode()).hexdigest())
    coordination.client.pexpire(key, 1)
    wait_for(lambda: not coordination.client.exists(key), timeout=10, what="the preview to expire")
    expired = api.post(URL, json=_body("dispatch-off", "bulkt", confirm=expiring))
    assert expired.status_code == 409 and "expired" in expired.json()["error"]

    malformed = api.post(URL, json=_body("dispatch-off", "bulkt", confirm="not a token!"))
    assert malformed.status_code == 422 and malformed.json()["field"] == "confirm"
    assert Match.get_by_id(match.id).auto_dispatch_listener  # nothing was acted on
    assert audit_entries(action="listeners.bulk") == []


def test_a_bulk_action_without_a_reason_a_confirm_or_a_filter_is_422(api, make_match, coordination):
    make_match("bulkr", status="inprogress")
    no_reason = api.post(URL, json={"action": "stop", "filter": {"league": "bulkr"}, "dry_run": True})
    assert no_reason.status_code == 422 and no_reason.json()["field"] == "reason"
    blank = api.post(URL, json={**_body("stop", "bulkr", dry_run=True), "reason": "  "})
    assert blank.status_code == 422 and blank.json()["field"] == "reason"
    assert api.post(URL, json=_body("stop", "bulkr")).status_code == 422  # neither dry run nor confirm
    both = api.post(URL, json=_body("stop", "bulkr", dry_run=True, confirm="x" * 43))
    assert both.status_code == 422
    no_filter = api.post(URL, json={"action": "stop", "filter": {}, "reason": "r", "dry_run": True})
    assert no_filter.status_code == 422
    unknown = api.post(URL, json=_body("stop", "no-such-league", dry_run=True))
    assert unknown.status_code == 404


def test_the_filter_by_badge_and_ids(api, make_match, coordination):
    a = make_match("bulkb", status="inprogress")
    b = make_match("bulkb", status="inprogress")
    api.post(f"/v1/matches/{a.id}/stop-listener", json={"reason": "drill"})  # no run: badge "-"
    by_ids = {"action": "dispatch-on", "filter": {"match_ids": [a.sr_id]}, "reason": "r", "dry_run": True}
    assert api.post(URL, json=by_ids).json()["match_ids"] == [str(a.id)]
    badge = {"action": "dispatch-on", "filter": {"league": "bulkb", "badge": "Running"}, "reason": "r"}
    answer = api.post(URL, json={**badge, "dry_run": True}).json()
    assert answer["count"] == 0 and answer["confirm"] is None
    none = {"action": "dispatch-on", "filter": {"league": "bulkb", "badge": "-"}, "reason": "r"}
    assert sorted(api.post(URL, json={**none, "dry_run": True}).json()["match_ids"]) == sorted(
        [str(a.id), str(b.id)]
    )

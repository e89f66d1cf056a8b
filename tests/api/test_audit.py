"""The audit log over HTTP: an API act names its key, its reason and request id; GET /v1/audit filters."""

from __future__ import annotations

import uuid

import httpx
import pytest

from models.audit import audit_entries
from models.listener_record import MatchListenerRecord
from tests.api.conftest import bearer

pytestmark = pytest.mark.services


def test_an_api_stop_is_audited_with_the_key_its_reason_and_the_request_id(api, make_match):
    match = make_match(status="inprogress")
    MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    stopped = api.post(
        f"/v1/matches/{match.id}/stop-listener",
        json={"reason": "wrong feed"},
        headers={"X-Request-Id": "req-42"},
    )
    assert stopped.status_code == 200, stopped.text
    [entry] = audit_entries(action="listener.stop")
    assert (entry.who, entry.reason, entry.request_id) == ("test-operator", "wrong feed", "req-42")
    assert entry.who_key_id is not None and entry.target == f"match:{match.id}"


@pytest.mark.parametrize("body", [None, {}, {"reason": ""}, {"reason": "   "}])
def test_a_stop_without_a_reason_is_422_and_stops_nothing(api, make_match, body):
    match = make_match(status="inprogress")
    record = MatchListenerRecord.create(id=str(uuid.uuid4()), match=match.id)
    answer = api.post(f"/v1/matches/{match.id}/stop-listener", json=body)
    assert answer.status_code == 422, answer.text
    assert MatchListenerRecord.get_by_id(record.id).ended_at is None and audit_entries() == []


def test_a_forced_start_needs_a_reason_and_records_it(api, make_match):
    match = make_match(status="scheduled")
    url = f"/v1/matches/{match.id}/start-listener"
    assert api.post(url, json={"force": True}).status_code == 422
    assert api.post(url, json={"force": True, "reason": "drill"}).status_code == 202
    [entry] = audit_entries()
    assert (entry.action, entry.who, entry.reason) == ("listener.force_start", "test-operator", "drill")


def test_get_audit_filters_for_a_read_key(api, api_server, keys, make_match):
    one, two = make_match(status="scheduled"), make_match(status="scheduled")
    api.post(f"/v1/matches/{one.id}/auto-dispatch", json={"on": False, "reason": "hold"})
    api.post(f"/v1/matches/{two.id}/auto-dispatch", json={"on": False})
    api.post("/v1/listeners/sweep", json={"reason": "tidy"})
    with httpx.Client(base_url=api_server.url, headers=bearer(keys["read"]), timeout=30) as reader:
        everything = reader.get("/v1/audit").json()["entries"]
        assert [e["action"] for e in everything] == [
            "listeners.sweep",
            "match.dispatch_off",
            "match.dispatch_off",
        ]
        [mine] = reader.get("/v1/audit", params={"match_id": str(one.id)}).json()["entries"]
        assert mine["before"] == {"auto_dispatch": True} and mine["after"] == {"auto_dispatch": False}
        assert mine["reason"] == "hold" and mine["who"] == "test-operator"
        assert (
            reader.get("/v1/audit", params={"action": "listeners.sweep"}).json()["entries"][0]["reason"]
            == "tidy"
        )
        assert reader.get("/v1/audit", params={"who": "someone"}).json() == {"entries": []}
        assert len(reader.get("/v1/audit", params={"limit": 1}).json()["entries"]) == 1
        assert reader.get("/v1/audit", params={"since": "2999-01-01T00:00:00Z"}).json() == {"entries": []}
        bad = reader.get("/v1/audit", params={"since": "2024-01-01T00:00:00"})
        assert bad.status_code == 422 and bad.json()["field"] == "since"
    assert (
        httpx.get(f"{api_server.url}/v1/audit", headers=bearer(keys["trigger"]), timeout=30).status_code
        == 403
    )

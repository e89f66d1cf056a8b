"""Input limits (415, 413, unknown fields 422) and X-Request-Id on every answer."""

from __future__ import annotations

from tests.api.conftest import answers_of_each_kind
from tests.api.test_triggers import LINEUP


def test_a_body_that_is_not_json_is_415(api):
    r = api.post("/v1/trigger/lineup", content=b"league_id=L1", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = api.post("/v1/trigger/lineup", content=b'{"league_id": "L1"}', headers={"Content-Type": ""})
    assert r.status_code == 415


def test_a_body_over_64_kib_is_413(api, read_queue):
    big = {**LINEUP, "decision_inputs": {"padding": "x" * 70_000}}
    r = api.post("/v1/trigger/lineup", json=big)
    assert r.status_code == 413
    assert read_queue("lineup_updates") == []


def test_a_chunked_body_over_64_kib_is_413(api):
    def chunks():
        yield b'{"league_id": "'
        for _ in range(70):
            yield b"x" * 1024
        yield b'"}'

    r = api.post("/v1/trigger/lineup", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_unknown_fields_are_422_naming_them(api):
    r = api.post("/v1/trigger/lineup", json={**LINEUP, "surprise": 1})
    assert r.status_code == 422 and r.json()["field"] == "surprise"
    r = api.post("/v1/trigger/lineup", json={**LINEUP, "swaps": [{"player_id": 1, "to_slot": "BN", "x": 1}]})
    assert r.status_code == 422 and r.json()["field"] == "swaps[0].x"


def test_malformed_json_is_422(api):
    r = api.post("/v1/trigger/lineup", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422


def test_every_answer_has_a_request_id(api, api_server):
    answers = [
        *answers_of_each_kind(api, api_server),
        api.get("/v1/actions/00000000-0000-4000-8000-000000000000"),
    ]
    ids = [a.headers.get("x-request-id") for a in answers]
    assert all(ids) and len(set(ids)) == len(ids)
    assert [a.status_code for a in answers] == [200, 202, 422, 415, 404, 401, 404]


def test_a_callers_request_id_is_kept(api):
    r = api.get("/healthz", headers={"X-Request-Id": "caller-123"})
    assert r.headers["x-request-id"] == "caller-123"
    r = api.get("/healthz", headers={"X-Request-Id": "bad id with spaces"})
    assert r.headers["x-request-id"] != "bad id with spaces"

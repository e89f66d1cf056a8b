"""POST /v1/runs with trigger event on a real `kickoff serve`: one run per key and debounce window."""

from __future__ import annotations

import time

import pytest

from models.run_log import RunLog
from tests.runs.conftest import roomy_debounce, window_end
from tests.waiting import wait_for


def _event(api, key: str, seconds: float):
    body = {"job": "noop", "trigger": "event", "event_key": key, "debounce_seconds": seconds}
    return api.post("/v1/runs", json=body)


def test_two_events_of_one_key_in_one_window_are_one_run(api):
    seconds = roomy_debounce()
    first = _event(api, "match-1", seconds)
    second = _event(api, "match-1", seconds)
    other = _event(api, "match-2", seconds)
    assert first.status_code == 202, first.text
    assert first.json()["status"] == "queued" and first.json()["dedupe_key"].startswith("noop@match-1@")
    assert second.status_code == 200, second.text
    assert (second.json()["status"], second.json()["run_id"]) == ("duplicate", first.json()["run_id"])
    assert other.status_code == 202 and other.json()["run_id"] != first.json()["run_id"]
    assert RunLog.get_by_id(first.json()["run_id"]).trigger == "event"
    shown = api.get(f"/v1/runs/{first.json()['run_id']}").json()
    assert (shown["trigger"], shown["dedupe_key"]) == ("event", first.json()["dedupe_key"])


def test_an_event_in_the_next_window_is_a_new_run(api):
    first = _event(api, "match-1", 1).json()
    end = window_end(first["dedupe_key"], 1)
    wait_for(lambda: time.time() >= end, timeout=10, what="the event's 1 s window to end")
    later = _event(api, "match-1", 1)
    assert later.status_code == 202, later.text
    assert later.json()["run_id"] != first["run_id"]
    assert window_end(later.json()["dedupe_key"], 1) > end


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"trigger": "event"}, "event_key", id="event-without-key"),
        pytest.param({"trigger": "event", "event_key": ""}, "event_key", id="empty-key"),
        pytest.param({"trigger": "event", "event_key": "  "}, "event_key", id="blank-key"),
        pytest.param({"trigger": "manual", "event_key": "k"}, "trigger", id="key-on-manual"),
        pytest.param({"debounce_seconds": 5}, "trigger", id="debounce-on-manual"),
        pytest.param(
            {"trigger": "event", "event_key": "k", "debounce_seconds": 0}, "debounce_seconds", id="zero"
        ),
        pytest.param(
            {"trigger": "event", "event_key": "k", "debounce_seconds": True}, "debounce_seconds", id="boolean"
        ),
        pytest.param(
            {"trigger": "event", "event_key": "k", "debounce_seconds": "5"}, "debounce_seconds", id="string"
        ),
        pytest.param({"trigger": "schedule"}, "trigger", id="schedule-is-not-asked-for"),
    ],
)
def test_an_out_of_bounds_event_is_422_naming_its_field_and_saves_nothing(api, body, field):
    r = api.post("/v1/runs", json={"job": "noop", **body})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert RunLog.select().count() == 0

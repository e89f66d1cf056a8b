"""Issue 35 item 1 against a real `kickoff serve`: a run's params cannot name places or go unbounded."""

from __future__ import annotations

import httpx
import pytest

from models.run_log import RunLog
from tests.api.conftest import bearer


@pytest.fixture
def trigger_api(api_server, keys, fresh_queues) -> httpx.Client:
    with httpx.Client(base_url=api_server.url, headers=bearer(keys["trigger"]), timeout=30.0) as client:
        yield client


def _runs() -> int:
    return RunLog.select().count()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"job": "sync_players"}, id="sync-players"),
        pytest.param(
            {"job": "sync_players", "params": {"source": "http://127.0.0.1:9/latest/meta-data/"}},
            id="sync-players-with-source",
        ),
    ],
)
def test_a_trigger_key_may_not_publish_sync_players(trigger_api, body):
    before = _runs()
    answer = trigger_api.post("/v1/runs", json=body)
    assert answer.status_code == 403, answer.text
    assert "operator" in answer.json()["error"]
    assert _runs() == before


def test_an_operator_may_not_name_the_player_feed_either(api):
    answer = api.post("/v1/runs", json={"job": "sync_players", "params": {"source": "/etc/passwd"}})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "params"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"job": "noop", "params": {"trace_dir": "/tmp"}}', id="trace-dir"),
        pytest.param(b'{"job": "sleep", "params": {"seconds": Infinity}}', id="infinity"),
        pytest.param(b'{"job": "sleep", "params": {"seconds": NaN}}', id="nan"),
        pytest.param(b'{"job": "sleep", "params": {"seconds": 1e308}}', id="huge"),
        pytest.param(b'{"job": "scoped", "params": {"steps": ["../x"]}}', id="path-in-text"),
    ],
)
def test_params_naming_a_place_or_unbounded_are_422_and_publish_nothing(trigger_api, raw):
    before = _runs()
    answer = trigger_api.post("/v1/runs", content=raw, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "params"
    assert _runs() == before

"""The HTTP trigger client's retry policy against real servers, X-Run-Id, and `kickoff trigger --api`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from client.errors import ApiRequestError
from client.trigger_http import HttpTriggerClient
from harness.ports import free_port
from publisher.actions import get_action
from publisher.errors import (
    TriggerConflictError,
    TriggerReferenceNotFound,
    TriggerUnavailableError,
    TriggerValidationError,
)
from publisher.triggers import LineupRequest
from runs.scope import run_scope
from tests.api.conftest import REPO
from tests.api.failing_server import Script, failing_server

REQUEST = LineupRequest(league_id="L1", team_id="7", swaps=[{"player_id": 3918298, "to_slot": "BN"}])
OK = (202, {"status": "queued", "tracking_id": "00000000-0000-4000-8000-000000000000"})


@pytest.fixture
def fast(settings):
    """Six attempts, 10 ms doubling to 40 ms (the default policy's shape, scaled down)."""
    return settings.model_copy(
        update={
            "trigger_retry_attempts": 6,
            "trigger_retry_initial_seconds": 0.01,
            "trigger_retry_max_seconds": 0.04,
        }
    )


def client(url: str, settings, sleeps: list[float]) -> HttpTriggerClient:
    def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return HttpTriggerClient(base_url=url, api_key="kk_test", settings=settings, timeout=5, sleep=sleep)


def test_5xx_answers_are_retried_until_one_succeeds(fast):
    script = Script([(503, {"error": "down"}), (500, {"error": "oops"}), (502, {"error": "gw"}), OK])
    sleeps: list[float] = []
    with failing_server(script) as url:
        data = client(url, fast, sleeps).send(REQUEST)
    assert data == OK[1]
    assert len(script.received) == 4 and sleeps == [0.01, 0.02, 0.04]
    assert script.received[0]["body"]["team_id"] == "7"
    assert script.received[0]["headers"]["authorization"] == "Bearer kk_test"


def test_six_attempts_then_the_503_is_raised_with_its_tracking_id(fast):
    script = Script([(503, {"error": "not delivered", "tracking_id": "t-1"})])
    sleeps: list[float] = []
    with failing_server(script) as url, pytest.raises(TriggerUnavailableError) as info:
        client(url, fast, sleeps).send(REQUEST)
    assert len(script.received) == 6 and sleeps == [0.01, 0.02, 0.04, 0.04, 0.04]
    assert info.value.tracking_id == "t-1"


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (
            422,
            {"error": "swaps[0].player_id: ESPN id", "field": "swaps[0].player_id"},
            TriggerValidationError,
        ),
        (
            404,
            {"error": "after_tracking_id: no action has tracking id x", "field": "after_tracking_id"},
            TriggerReferenceNotFound,
        ),
        (409, {"error": "pick 12 is already filled"}, TriggerConflictError),
        (401, {"error": "an API key is required"}, ApiRequestError),
        (403, {"error": "scope"}, ApiRequestError),
        (413, {"error": "too large"}, ApiRequestError),
    ],
)
def test_a_4xx_is_never_retried(fast, status, body, error):
    script = Script([(status, body), OK])
    sleeps: list[float] = []
    with failing_server(script) as url, pytest.raises(error) as info:
        client(url, fast, sleeps).send(REQUEST)
    assert len(script.received) == 1 and sleeps == []
    if status == 422:
        assert info.value.field == "swaps[0].player_id"


def test_a_timeout_is_retried(fast):
    script = Script([(0, {}), OK], hang_seconds=2.0)  # past the client's 0.5 s timeout
    sleeps: list[float] = []
    with failing_server(script) as url:
        http = HttpTriggerClient(
            base_url=url, api_key="kk_test", settings=fast, timeout=0.5, sleep=sleeps.append
        )
        assert http.send(REQUEST) == OK[1]
    assert len(script.received) == 2 and sleeps == [0.01]


def test_connection_errors_are_retried(fast):
    sleeps: list[float] = []
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens
    with pytest.raises(TriggerUnavailableError, match="cannot reach"):
        client(url, fast, sleeps).send(REQUEST)
    assert sleeps == [0.01, 0.02, 0.04, 0.04, 0.04]


def test_an_unreachable_api_is_named_with_its_password_masked(fast):
    url = f"http://caller:sekrit@127.0.0.1:{free_port()}"  # nothing listens
    with pytest.raises(TriggerUnavailableError) as info:
        client(url, fast, []).send(REQUEST)
    assert "caller:***@127.0.0.1" in str(info.value) and "sekrit" not in str(info.value)


def test_inside_run_scope_the_run_id_links_the_action(api_server, keys, fast, fresh_queues):
    with run_scope("api-caller", settings=fast) as scope:
        http = HttpTriggerClient(base_url=api_server.url, api_key=keys["trigger"], settings=fast)
        data = http.send(REQUEST)
    assert get_action(data["tracking_id"]).run_id == scope.run_id


def _kickoff(args, env):
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def test_kickoff_trigger_api_sends_through_the_server(api_server, keys, server_env, fresh_queues):
    env = {**server_env, "KICKOFF_API_KEY": keys["trigger"]}
    args = ["trigger", "lineup", "--league", "L1", "--team", "7", "--swap", "3918298:BN"]
    out = _kickoff([*args, "--api", api_server.url, "--json"], env)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["status"] in ("queued", "pending")
    assert get_action(answer["tracking_id"]).kind == "lineup_updates"
    refused = _kickoff(
        ["trigger", "lineup", "--league", "L1", "--team", "7", "--swap", "x:BN", "--api", api_server.url], env
    )
    assert refused.returncode == 3 and "swaps[0].player_id" in refused.stderr  # cli/answers.py: invalid
    no_key = _kickoff(
        [*args, "--api", api_server.url], {k: v for k, v in env.items() if k != "KICKOFF_API_KEY"}
    )
    assert no_key.returncode == 2 and "KICKOFF_API_KEY" in no_key.stderr


def test_kickoff_trigger_rumor_action_api(api_server, keys, server_env, fresh_queues):
    env = {**server_env, "KICKOFF_API_KEY": keys["trigger"]}
    signal = json.dumps({"player_id": 3918298, "kind": "ruled_out", "confidence": 0.9})
    args = ["trigger", "rumor-action", "--league", "L1", "--team", "7", "--season", "2026", "--week", "3"]
    args += ["--roster", "3918298=RB", "--signal", signal, "--api", api_server.url, "--json"]
    out = _kickoff(args, env)
    assert out.returncode == 0, out.stderr
    [outcome] = json.loads(out.stdout)["outcomes"]  # one document, one outcome per signal
    assert outcome["rule"] and outcome["results"][0]["status"] in ("queued", "pending")

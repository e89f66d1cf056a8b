"""trigger_client: six attempts with 5 s doubling to 30 s for server-side errors, none for 4xx, X-Run-Id."""

from __future__ import annotations

import pytest

from client.trigger_client import TriggerClient, is_retryable, retry_delays
from config.errors import DatabaseUnavailable
from publisher.actions import get_action
from publisher.errors import TriggerConflictError, TriggerUnavailableError, TriggerValidationError
from publisher.run_context import bound_run_id
from tests.publisher.helpers import draft, lineup


def test_the_default_policy_is_six_attempts_5s_doubling_to_30s(settings):
    client = TriggerClient(publisher=None, settings=settings)
    assert client.attempts == 6
    assert retry_delays(attempts=6, initial=client.initial_delay, maximum=client.max_delay) == [
        5,
        10,
        20,
        30,
        30,
    ]


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        pytest.param(ConnectionError("reset"), True, id="connection-error"),
        pytest.param(TimeoutError("timed out"), True, id="timeout"),
        pytest.param(TriggerUnavailableError("503"), True, id="server-error-503"),
        pytest.param(
            DatabaseUnavailable(service="PostgreSQL", setting="DATABASE_URL", address="x", reason="down"),
            True,
            id="server-error-database",
        ),
        pytest.param(TriggerValidationError("espn_id", "sleeper id"), False, id="validation-422"),
        pytest.param(TriggerConflictError("pick filled"), False, id="conflict-409"),
    ],
)
def test_which_errors_are_retried(settings, error, retried):
    calls = []
    sleeps = []

    def send(request, **kw):
        calls.append(request)
        raise error

    client = TriggerClient(
        publisher=None, settings=settings, initial_delay=0.001, max_delay=0.004, sleep=sleeps.append
    )
    with pytest.raises(type(error)):
        client.call(send, "req")
    assert len(calls) == (6 if retried else 1)
    assert sleeps == ([0.001, 0.002, 0.004, 0.004, 0.004] if retried else [])
    assert is_retryable(error) is retried


def test_a_transient_failure_then_success_returns_the_result(settings):
    answers = [TriggerUnavailableError("503"), "ok"]

    def send(request, **kw):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert TriggerClient(publisher=None, settings=settings, sleep=lambda s: None).call(send, "r") == "ok"


def test_the_run_id_of_the_enclosing_scope_is_sent_and_linked_to_the_action(publisher, pub_settings):
    client = TriggerClient(publisher=publisher, settings=pub_settings)
    with bound_run_id("run-7"):
        assert client.headers() == {"X-Run-Id": "run-7"}
        result = client.lineup(lineup())
    assert client.headers() == {}
    assert get_action(result.tracking_id).run_id == "run-7"


def test_a_trigger_client_inside_run_scope_links_the_action_to_the_recorded_run(
    publisher, pub_settings, monkeypatch
):
    from runs.scope import run_scope

    monkeypatch.delenv("RUN_ID", raising=False)
    client = TriggerClient(publisher=publisher, settings=pub_settings)
    with run_scope("lineup-job", settings=pub_settings) as scope:
        result = client.lineup(lineup())
    assert get_action(result.tracking_id).run_id == str(scope.run_id)


def test_send_finds_the_trigger_of_any_declared_queue_by_its_request(publisher, pub_settings, read_queue):
    client = TriggerClient(publisher=publisher, settings=pub_settings, sleep=lambda _: None)
    result = client.send(draft())
    assert get_action(result.tracking_id).kind == "draft_targets"
    [(body, _)] = read_queue("draft_targets")
    assert body["tracking_id"] == result.tracking_id

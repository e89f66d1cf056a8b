"""The OpenAPI document is the exact contract: strict, bounded types; every status documented.

The last test runs schemathesis with every check against a real `kickoff serve`, once per key
scope, as a stranger would (a fixed seed and a bounded number of examples keep it short and
repeatable). The operator routes it calls act on this test's throw-away database only: no
listener worker runs, so a start is only enqueued.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from api.auth import Need, route_rules
from tests.api.conftest import bearer

pytestmark = pytest.mark.services

#: The schemathesis run per key scope: examples per operation and the phases. Scopes rank read <
#: trigger and read < operator < admin (api.auth): the trigger and admin keys reach every route
#: between them, so they run every phase (examples, coverage, fuzzing, stateful) with the full
#: count. A read or operator key is refused (403) on the routes above it whatever the request, and
#: every route it may call also runs under the admin key, so a short fuzzing phase checks that its
#: refusals are documented (the coverage phase would send its hundreds of boundary cases to 403s).
RUNS = {
    "read": (3, "fuzzing"),
    "trigger": (10, "examples,coverage,fuzzing,stateful"),
    "operator": (3, "fuzzing"),
    "admin": (10, "examples,coverage,fuzzing,stateful"),
}
SEED = 1
RUN_DEADLINE_SECONDS = 300


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/listeners/sweep", {"heartbeat_stale_seconds": False}, "heartbeat_stale_seconds"),
        ("/v1/listeners/sweep", {"heartbeat_stale_seconds": 3.85e306}, "heartbeat_stale_seconds"),
        ("/v1/listeners/sweep", {"heartbeat_stale_seconds": "5"}, "heartbeat_stale_seconds"),
        ("/v1/listeners/dispatch", {"is_test": 0}, "is_test"),
        ("/v1/listeners/dispatch", {"within_minutes": True}, "within_minutes"),
        ("/v1/listeners/dispatch", {"within_minutes": 10**12}, "within_minutes"),
    ],
    ids=[
        "false-as-seconds",
        "huge-seconds",
        "string-seconds",
        "0-as-bool",
        "true-as-minutes",
        "huge-minutes",
    ],
)
def test_an_operator_route_refuses_a_value_of_the_wrong_type_or_out_of_bounds_with_422(
    api, path, body, field
):
    answer = api.post(path, json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == field


def test_a_trigger_refuses_a_boolean_or_a_string_where_an_espn_id_belongs(api):
    team = {"league_id": "L1", "team_id": "7"}
    for player in (True, "4046", 0, 2**60, 1.5):
        answer = api.post("/v1/trigger/waiver", json={**team, "add_player_id": player})
        assert answer.status_code == 422 and answer.json()["field"] == "add_player_id", (player, answer.text)


def test_a_waiver_chained_behind_an_action_that_does_not_exist_is_404_naming_the_field(api):
    claim = {"league_id": "L1", "team_id": "7", "add_player_id": 4241457}
    answer = api.post("/v1/trigger/waiver", json={**claim, "after_tracking_id": str(uuid.uuid4())})
    assert answer.status_code == 404 and answer.json()["field"] == "after_tracking_id", answer.text


def test_an_unknown_job_is_refused_without_naming_the_servers_catalog_path(api):
    answer = api.post("/v1/runs", json={"job": "no_such_job"})
    assert answer.status_code == 422 and answer.json()["field"] == "job"
    assert "catalog.yaml" not in answer.text and str(Path.cwd()) not in answer.text
    assert "JOB_CATALOG_PATH" in answer.json()["error"]


def test_a_method_a_path_does_not_serve_is_405_allowing_every_method_of_the_path(api):
    answer = api.request("DELETE", "/v1/runs")
    assert answer.status_code == 405
    assert {m.strip() for m in answer.headers["allow"].split(",")} == {"GET", "POST"}


def test_every_operation_documents_the_errors_of_its_kind_with_the_error_body(api_server, settings):
    doc = httpx.get(f"{api_server.url}/openapi.json", timeout=30).json()
    rules = route_rules(create_app(settings))  # each route's need: declared on it, else api.auth.RULES
    error = {"$ref": "#/components/schemas/ErrorAnswer"}
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            need = rules[(method.upper(), path)]
            wanted = {"401", "403", "503"} if need in (Need.READ, Need.TRIGGER, Need.OPERATOR) else set()
            if "requestBody" in operation:
                wanted |= {"400", "413", "415", "422"}
            if any(p["in"] == "path" for p in operation.get("parameters", [])):
                wanted |= {"404", "422"}
            assert wanted <= set(responses), (method, path, sorted(responses))
            for status in wanted:
                assert responses[status]["content"]["application/json"]["schema"] == error, (method, path)


def test_the_run_body_offers_each_catalog_job_with_its_params_schema(api_server, keys):
    doc = httpx.get(f"{api_server.url}/openapi.json", timeout=30).json()
    alternatives = doc["components"]["schemas"]["RunBody"]["oneOf"]
    manual = {
        alt["properties"]["job"]["const"]: alt
        for alt in alternatives
        if alt["properties"]["trigger"] == {"const": "manual"}
    }
    event = {
        alt["properties"]["job"]["const"]: alt
        for alt in alternatives
        if alt["properties"]["trigger"] == {"const": "event"}
    }
    assert "sleep" in manual and "params" in manual["sleep"]["required"]  # sleep needs its seconds
    assert manual["noop"]["required"] == ["job"]
    assert event["noop"]["required"] == ["job", "trigger", "event_key"]
    assert manual.keys() == event.keys()


def _schemathesis(
    url: str, key: str, report: Path, *, examples: int, phases: str
) -> subprocess.CompletedProcess[str]:
    command = [
        os.path.join(os.path.dirname(sys.executable), "schemathesis"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(examples),
        "--phases",
        phases,
        "--seed",
        str(SEED),
        "--workers",
        "1",  # CPython 3.11 can fail compiling ASTs in two threads at once (gh-106905)
        "--request-timeout",
        "30",
        "--header",
        f"Authorization: Bearer {key}",
        "--report",
        "junit",
        "--report-dir",
        str(report),
    ]
    return subprocess.run(  # in the report's folder: its example database stays out of the work tree
        command, cwd=report.parent, capture_output=True, text=True, timeout=RUN_DEADLINE_SECONDS, check=False
    )


@pytest.mark.timeout(RUN_DEADLINE_SECONDS + 60)  # the suite's 120 s is too tight on a loaded machine
@pytest.mark.parametrize("scope", list(RUNS))
def test_schemathesis_with_every_check_finds_nothing(api_server, keys, amqp_vhost, tmp_path, scope):
    from publisher.amqp import AmqpPublisher
    from publisher.queues import ALL_QUEUES

    with AmqpPublisher(
        url=amqp_vhost
    ) as admin:  # every queue, as `kickoff amqp setup` and a deploy leave them
        admin.declare_durable(ALL_QUEUES)
    assert httpx.get(f"{api_server.url}/v1/runs", headers=bearer(keys["read"]), timeout=30).status_code == 200
    examples, phases = RUNS[scope]
    run = _schemathesis(api_server.url, keys[scope], tmp_path / "report", examples=examples, phases=phases)
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]


def test_the_schemathesis_run_covers_every_key_scope() -> None:
    from api.keys import Scope

    assert set(RUNS) == {scope.value for scope in Scope}

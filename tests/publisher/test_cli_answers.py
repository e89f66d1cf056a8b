"""Exit codes and --json answers of `kickoff trigger` and `kickoff runs publish` (0, 3, 4, 5)."""

from __future__ import annotations

import json
import subprocess

import pytest
from click.testing import CliRunner

from cli.answers import EXIT_CONFLICT, EXIT_INVALID, EXIT_UNAVAILABLE
from cli.main import cli
from tests.publisher.helpers import count

DOWN_URL = "amqp://guest:secret@127.0.0.1:1/%2F"
DRAFT = ["trigger", "draft-pick", "--league", "L1", "--team", "7", "--pick", "12", "--espn-id", "4426515"]
LINEUP = ["trigger", "lineup", "--league", "L1", "--team", "7", "--swap", "3139477:BE"]
LINEUP += ["--season", "2024", "--week", "3"]


@pytest.fixture
def run(test_env, publisher):
    runner = CliRunner()

    def invoke(*args: str, broker_down: bool = False) -> tuple[int, str]:
        env = {**test_env, "AMQP_URL": DOWN_URL} if broker_down else test_env
        result = runner.invoke(cli, list(args), env=env, catch_exceptions=False)
        return result.exit_code, result.output

    return invoke


def test_exit_codes_are_in_the_help_and_do_not_clash_with_usage_errors():
    assert (EXIT_INVALID, EXIT_CONFLICT, EXIT_UNAVAILABLE) == (3, 4, 5)
    for args in (["trigger", "--help"], ["trigger", "draft-pick", "--help"], ["runs", "publish", "--help"]):
        out = " ".join(CliRunner().invoke(cli, args).output.split())  # help text is wrapped
        assert "3 invalid" in out and "4 conflict" in out and "5 unavailable" in out


def test_queued_then_duplicate_exit_0_and_json_carries_published(run):
    code, out = run(*LINEUP, "--json")
    assert code == 0 and json.loads(out)["status"] == "queued" and json.loads(out)["published"] is True
    code, out = run(*LINEUP, "--json")
    assert code == 0 and json.loads(out)["status"] == "duplicate" and json.loads(out)["published"] is True


def test_a_trigger_with_the_broker_down_is_pending_exit_0(run):
    code, out = run(*LINEUP, "--json", broker_down=True)
    data = json.loads(out)
    assert code == 0 and data["status"] == "pending" and data["published"] is False
    code, out = run(*LINEUP, broker_down=True)
    assert code == 0 and out.startswith("duplicate ") and "not delivered yet" in out


def test_an_invalid_request_exits_3_with_the_field(run):
    code, out = run(*DRAFT[:-1], "DAL", "--json")
    data = json.loads(out)
    assert code == 3 and data["status"] == "invalid" and data["field"] == "espn_id"
    code, out = run(*DRAFT, "--expires-at", "tomorrow")
    assert code == 3 and "--expires-at" in out


def test_an_expired_pick_exits_4(run):
    code, out = run(*DRAFT, "--expires-at", "2020-01-01T00:00:00Z", "--json")
    assert code == 4 and json.loads(out)["status"] == "conflict"


def test_an_undelivered_pick_exits_5_and_the_retry_answers_queued(run):
    code, out = run(*DRAFT, "--json", broker_down=True)
    data = json.loads(out)
    assert code == 5 and data["status"] == "unavailable" and data["published"] is False
    tracking_id = data["tracking_id"]
    code, out = run(*DRAFT, broker_down=True)
    assert code == 5 and tracking_id in out and "retry with the same key" in out
    code, out = run(*DRAFT, "--json")
    assert code == 0 and json.loads(out) == {
        "status": "queued",
        "tracking_id": tracking_id,
        "published": True,
        "held": False,
    }


def test_runs_publish_answers_pending_with_the_broker_down_and_3_for_bad_params(run, db):
    code, out = run("runs", "publish", "noop", "--json", broker_down=True)
    data = json.loads(out)
    assert code == 0 and data["status"] == "pending" and data["published"] is False
    code, out = run("runs", "publish", "sleep", "--param", "seconds=soon", "--json")
    assert code == 3 and json.loads(out)["status"] == "invalid"


def test_a_trigger_with_postgresql_down_is_unavailable_exit_5(subprocess_env, publisher):
    env = {**subprocess_env, "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/kickoff_down"}
    out = subprocess.run(
        [".venv/bin/kickoff", *LINEUP, "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    data = json.loads(out.stdout)
    assert out.returncode == 5 and data["status"] == "unavailable" and "DATABASE_URL" in data["error"]
    assert count("activity_actions") == 0

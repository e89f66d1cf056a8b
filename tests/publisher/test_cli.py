"""The publisher CLI: amqp setup, trigger --json, outbox status/drain, trades reconciliation."""

from __future__ import annotations

import json
import subprocess

from models.audit import audit_entries
from publisher.amqp import AmqpPublisher
from publisher.queues import ALL_QUEUES


def test_amqp_setup_declares_the_outbox_queues_on_a_fresh_broker(subprocess_env, amqp_vhost, db):
    with AmqpPublisher(url=amqp_vhost) as admin:
        for queue in ALL_QUEUES:
            admin.delete_queue(queue)
    out = subprocess.run(
        [".venv/bin/kickoff", "amqp", "setup", "--json"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout)["declared"] == [
        "lineup_updates",
        "waiver_actions",
        "draft_targets",
        "job_runs",
    ]
    lineup = subprocess.run(
        [
            ".venv/bin/kickoff",
            "trigger",
            "lineup",
            "--league",
            "L1",
            "--team",
            "7",
            "--swap",
            "3139477:BE",
            "--season",
            "2024",
            "--week",
            "3",
            "--json",
        ],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(lineup.stdout)["status"] == "queued"


def test_a_lineup_trigger_without_season_or_week_still_sends_a_key_so_a_pod_retry_publishes_once(
    run, monkeypatch
):
    """The spec's lineup key has no season/week exception: then it hashes Job name, team and swaps."""
    args = ["trigger", "lineup", "--league", "L1", "--team", "7", "--swap", "3139477:BE", "--json"]
    monkeypatch.setenv("JOB_NAME", "lineup-cron-29001")
    first = json.loads(run(*args)[1])
    retry = json.loads(run(*args)[1])  # the CronJob's pod retry inside the same Job
    assert first["status"] == "queued"
    assert retry["status"] == "duplicate" and retry["tracking_id"] == first["tracking_id"]
    monkeypatch.setenv("JOB_NAME", "lineup-cron-29002")  # the next Job publishes again
    assert json.loads(run(*args)[1])["status"] == "queued"


def test_trigger_json_prints_queued_then_duplicate_with_the_same_tracking_id(run):
    args = [
        "trigger",
        "waiver",
        "--league",
        "L1",
        "--team",
        "7",
        "--add",
        "4430807",
        "--drop",
        "3916387",
        "--season",
        "2024",
        "--week",
        "3",
        "--json",
    ]
    code, out = run(*args)
    first = json.loads(out)
    assert code == 0 and first["status"] == "queued"
    code, out = run(*args)
    assert json.loads(out) == {
        "status": "duplicate",
        "tracking_id": first["tracking_id"],
        "published": True,
        "held": False,
    }


def test_a_sleeper_id_is_refused_in_one_line_naming_the_field(run):
    code, out = run(
        "trigger", "draft-pick", "--league", "L1", "--team", "7", "--pick", "3", "--espn-id", "DAL"
    )
    assert code == 3 and "espn_id" in out and "Sleeper" in out and "Traceback" not in out


def test_outbox_status_and_drain(run):
    code, out = run("outbox", "status", "--json")
    assert code == 0 and json.loads(out)["backlog"] == 0 and json.loads(out)["dead"] == 0
    code, out = run("outbox", "drain", "--json")
    assert code == 0 and json.loads(out)["published"] == 0
    [entry] = audit_entries(action="outbox.drain")  # an operator's drain is audited (issue 35)
    assert entry.who_key_id is None and entry.target == "outbox"


def test_trigger_show_and_result_and_the_chained_claim(run):
    _, out = run(
        "trigger", "lineup", "--league", "L1", "--team", "7", "--swap", "4362628:IR:ir", "--no-key", "--json"
    )
    parent = json.loads(out)["tracking_id"]
    code, out = run(
        "trigger", "waiver", "--league", "L1", "--team", "7", "--add", "4426515", "--after", parent
    )
    assert code == 0 and "held" in out
    assert run("trigger", "result", parent, "succeeded")[0] == 0
    code, out = run("trigger", "show", parent, "--json")
    assert json.loads(out)["status"] == "succeeded"
    code, out = run("trigger", "result", parent, "running")  # a finished action does not move
    assert (
        code == 4
        and out.strip() == f"Error: action {parent} is succeeded: a worker result cannot change it to running"
    )
    assert run("trigger", "result", parent, "succeeded")[0] == 0  # the same report again is a no-op
    code, out = run("trigger", "result", parent, "queued")
    assert code == 2 and "'queued' is not one of" in out
    assert json.loads(run("trigger", "show", parent, "--json")[1])["status"] == "succeeded"
    assert json.loads(run("outbox", "drain", "--json")[1])["released"] == 1
    code, out = run("trigger", "show", "00000000-0000-4000-8000-000000000000")
    assert code == 2


def test_trades_reconcile_lists_nothing_on_a_clean_log(run):
    code, out = run("trades", "reconcile")
    assert code == 0 and "no trade claims to reconcile" in out

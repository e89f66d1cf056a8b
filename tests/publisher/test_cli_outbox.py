"""`kickoff outbox`: drain with the broker away (exit 1), --now, oldest pending rows, retry-dead --json."""

from __future__ import annotations

import json
import subprocess
import uuid
from datetime import timedelta

from config.clock import utcnow
from models.db import database
from publisher.amqp import AmqpPublisher, OutgoingMessage
from publisher.drain import drain_outbox
from publisher.outbox import insert_row
from publisher.queues import LINEUP_UPDATES
from tests.publisher.helpers import dead_lineups

DOWN_URL = "amqp://guest:secret@127.0.0.1:1/%2F"


def _row(*, next_attempt_in: float = 0.0) -> str:
    message_id = str(uuid.uuid4())
    with database.atomic():
        insert_row(
            message=OutgoingMessage(queue=LINEUP_UPDATES, body={"i": 1}, message_id=message_id),
            tracking_id=None,
            next_attempt_at=utcnow() + timedelta(seconds=next_attempt_in),
        )
    return message_id


def test_drain_with_the_broker_unreachable_exits_5_with_one_line_naming_amqp_url(subprocess_env, publisher):
    _row()
    env = {**subprocess_env, "AMQP_URL": DOWN_URL}
    out = subprocess.run(
        [".venv/bin/kickoff", "outbox", "drain"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 5  # unavailable (cli/answers.EXIT_OF)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "AMQP_URL" in lines[0] and "secret" not in lines[0]
    assert out.stdout == ""
    status = database.execute_sql("SELECT status FROM outbox_messages").fetchone()[0]
    assert status == "pending"


def test_drain_says_when_a_row_in_backoff_is_due_and_now_ignores_the_backoff(run, read_queue):
    message_id = _row(next_attempt_in=600)
    code, out = run("outbox", "drain")
    assert code == 0 and out.startswith("published 0,")
    assert "backlog 1" in out and "waits for its backoff until" in out and "--now" in out
    code, out = run("outbox", "drain", "--json")
    data = json.loads(out)
    assert data["published"] == 0 and data["backlog"] == 1 and data["next_attempt_at"]
    code, out = run("outbox", "drain", "--now", "--json")
    data = json.loads(out)
    assert code == 0 and data["published"] == 1 and data["backlog"] == 0 and data["next_attempt_at"] is None
    assert [p.message_id for _, p in read_queue(LINEUP_UPDATES)] == [message_id]


def test_status_json_shows_attempts_next_attempt_time_and_last_error_of_the_oldest_pending_rows(
    run, pub_settings
):
    _row()
    down = AmqpPublisher(url=DOWN_URL, connect_timeout=1)
    assert drain_outbox(publisher=down, settings=pub_settings).failed == 1
    code, out = run("outbox", "status", "--json")
    data = json.loads(out)
    [row] = data["oldest_pending"]
    assert code == 0 and data["backlog"] == 1 and data["dead"] == 0
    assert row["attempts"] == 0 and row["tries"] == 1 and row["next_attempt_at"]
    assert "AMQP_URL" in row["last_error"] and "secret" not in row["last_error"]
    code, out = run("outbox", "status")
    assert "pending #" in out and "tries=1" in out and "next=" in out


def test_retry_dead_json_reports_rows_and_actions_restored(run, publisher, pub_settings, amqp_vhost):
    [tracking_id] = dead_lineups(amqp_vhost, publisher=publisher, settings=pub_settings)
    assert json.loads(run("outbox", "status", "--json")[1])["dead"] == 1
    code, out = run("outbox", "retry-dead", "--json")
    assert code == 0 and json.loads(out) == {"rows": 1, "actions": 1, "superseded": 0}
    code, out = run("trigger", "show", tracking_id, "--json")
    assert json.loads(out)["status"] == "queued"


def test_retry_dead_with_row_ids_retries_only_those_rows(run, publisher, pub_settings, amqp_vhost):
    dead_lineups(amqp_vhost, publisher=publisher, settings=pub_settings, keys=("lineup-7-a", "lineup-7-b"))
    first, second = (
        r[0] for r in database.execute_sql("SELECT id FROM outbox_messages ORDER BY id").fetchall()
    )
    code, out = run("outbox", "retry-dead", str(first), "--json")
    assert code == 0 and json.loads(out) == {"rows": 1, "actions": 1, "superseded": 0}
    status = dict(database.execute_sql("SELECT id, status FROM outbox_messages").fetchall())
    assert status == {first: "pending", second: "dead"}

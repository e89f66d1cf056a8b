"""Issue 35 item 6 against real `kickoff serve`s: no answer and no console page shows where RabbitMQ is
(URL, user, host, port, virtual host) or a file system path (DATA_DIR's or any other); each shows the
error's kind and sentence, and the server's log keeps the whole text."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from config.public_text import public_text
from models.db import database
from models.run_log import RunLog
from tests.api.conftest import DOWN_AMQP_URL, bearer, broken_server  # noqa: F401 (a fixture)
from tests.api.test_trades_actions_runs import OFFER
from tests.api.test_triggers import LINEUP
from tests.waiting import wait_for

pytestmark = pytest.mark.services

#: What locates the broker or a file: none of it may reach a caller.
HIDDEN = ("://", "guest", "127.0.0.1", "%2F", "kickoff_secret_vhost", "/srv/kickoff-data")


def _hides_places(text: str) -> None:
    for hidden in HIDDEN:
        assert hidden not in text, (hidden, text)


def test_broker_failures_in_answers_and_on_the_outbox_actions_and_trades_pages_name_no_place(
    broken_server,  # noqa: F811
    console_server,
    console_keys,
    signed_in,
):
    trigger = bearer(console_keys["trigger"])
    pending = httpx.post(
        f"{broken_server.url}/v1/trade/offers/o-leak/approve", json=OFFER, headers=trigger, timeout=60
    )
    assert pending.status_code == 202 and pending.json()["status"] == "pending", pending.text
    assert "BrokerConnectionError" in pending.json()["error"] or "AMQP_URL" in pending.json()["error"]
    _hides_places(pending.text)

    lineup = httpx.post(f"{broken_server.url}/v1/trigger/lineup", json=LINEUP, headers=trigger, timeout=60)
    assert lineup.status_code in (200, 202), lineup.text
    tracking_id = lineup.json()["tracking_id"]

    def last_error() -> str | None:
        rows = database.execute_sql(
            "SELECT last_error FROM outbox_messages WHERE tracking_id = %s", (tracking_id,)
        ).fetchall()
        return rows[0][0] if rows and rows[0][0] else None

    stored = wait_for(last_error, timeout=60, what="the failed publish's stored error")
    assert "AMQP_URL=amqp://guest:***@127.0.0.1:1" in stored  # the whole text stays on the box
    shown = httpx.get(
        f"{console_server.url}/v1/actions/{tracking_id}", headers=bearer(console_keys["read"]), timeout=60
    )
    assert shown.status_code == 200 and shown.json()["delivery"]["last_error"], shown.text
    _hides_places(shown.text)

    # a broker's refusal naming its virtual host, stored as the drain stores it
    database.execute_sql(
        "UPDATE execution_log SET status = 'set_aside', error = %s WHERE claim_key = 'o-leak'",
        ("PublishRefusedError: NOT_FOUND - no queue 'trade_submissions' in vhost 'kickoff_secret_vhost'",),
    )
    reader = signed_in(console_keys["read"])
    for path in ("/outbox", f"/actions?tracking_id={tracking_id}", "/trades"):
        page = reader.client.get(path)
        assert page.status_code == 200, path
        _hides_places(page.text)
    assert "BrokerConnectionError" in reader.client.get("/outbox").text  # the kind is still said
    assert "vhost &lt;hidden&gt;" in reader.client.get("/trades").text
    claims = httpx.get(
        f"{console_server.url}/v1/trade/reconcile", headers=bearer(console_keys["read"]), timeout=60
    )
    assert "o-leak" in claims.text
    _hides_places(claims.text)


def test_a_runs_failure_and_its_missing_log_name_no_path_on_the_api_or_the_console(
    console_server, console_keys, signed_in, db
):
    missing = "/srv/kickoff-data/runs/r1/attempt-1.log"
    run = RunLog.create(
        job="noop",
        trigger="api",
        dedupe_key=f"leak-{uuid.uuid4()}",
        params={},
        status="failed",
        reason=f"cannot start: [Errno 2] No such file or directory: '{missing}'",
        error=f"[Errno 13] Permission denied: '{Path(missing).parent}'",
        log_path=missing,
    )
    for scope in ("read", "admin"):
        shown = httpx.get(
            f"{console_server.url}/v1/runs/{run.id}", headers=bearer(console_keys[scope]), timeout=60
        )
        assert shown.status_code == 200 and "Permission denied" in shown.json()["error"], shown.text
        _hides_places(shown.text)
    for scope in ("read", "admin"):
        page = signed_in(console_keys[scope]).client.get(f"/runs/{run.id}")
        assert page.status_code == 200 and "cannot read the log" in page.text
        _hides_places(page.text)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "BrokerConnectionError: cannot reach RabbitMQ at AMQP_URL=amqp://u:***@rabbit.internal:5672/v: x",
            "BrokerConnectionError: cannot reach RabbitMQ at AMQP_URL: x",
        ),
        ("StreamLost: reset by ('10.0.0.5', 5672)", "StreamLost: reset by <address>"),
        ("lost rabbit.internal:5672 at 16:23:40", "lost <address> at 16:23:40"),
        ("530 NOT_ALLOWED - vhost kickoff_x not found", "530 NOT_ALLOWED - vhost <hidden> not found"),
        (
            "530 NOT_ALLOWED - access to vhost 'kickoff_x' refused for user 'guest'",
            "530 NOT_ALLOWED - access to vhost <hidden> refused for user <hidden>",
        ),
        ('Connect call failed ("127.0.0.1", 5672)', "Connect call failed <address>"),
        ("the user asked twice", "the user asked twice"),
        ("cannot write /data/kickoff/archive/a.json", "cannot write <path>"),
        ("DATA_DIR=/data is not writable", "DATA_DIR is not writable"),
        ("use POST /v1/trade/reconcile", "use POST /v1/trade/reconcile"),
    ],
)
def test_public_text_keeps_the_sentence_and_drops_each_kind_of_place(text, shown):
    assert public_text(text) == shown
    assert DOWN_AMQP_URL not in public_text(DOWN_AMQP_URL)

"""The console's action page says a result is late: kept beside the settled action, which it never changed."""

from __future__ import annotations

from datetime import timedelta

from config.clock import utcnow
from publisher.amqp import AmqpPublisher
from publisher.results import report_result, verify_results
from publisher.triggers import trigger_lineup
from tests.publisher.helpers import lineup

DAY = 86400.0


def test_the_action_page_shows_a_late_result(console_server, console_keys, signed_in, fresh_queues, settings):
    with AmqpPublisher(url=settings.amqp_url) as publisher:
        tracking_id = trigger_lineup(lineup(), publisher=publisher, settings=settings).tracking_id
    verify_results(result_timeout_seconds=DAY, now=utcnow() + timedelta(seconds=DAY + 1))
    report_result(tracking_id, outcome="succeeded")
    verify_results(result_timeout_seconds=DAY)
    op = signed_in(console_keys["operator"])
    page = op.client.get("/actions", params={"tracking_id": tracking_id})
    assert page.status_code == 200
    assert "reported after the action was failed: kept here, the action was left as it is" in page.text

"""POST /v1/trigger/draft-pick for a target whose message is dead: 409 naming retry-dead, not a 503 retry."""

from __future__ import annotations

from models.db import database
from publisher.queues import DRAFT_TARGETS
from tests.api.test_triggers import draft
from tests.publisher.helpers import reject_all


def test_a_dead_draft_target_is_a_conflict_that_says_how_to_revive_it(api, amqp_vhost):
    body = draft(idempotency_key="L1:12:dead")
    reject_all(amqp_vhost, DRAFT_TARGETS)
    first = api.post("/v1/trigger/draft-pick", json=body)
    assert first.status_code == 503 and first.json()["retryable"] is True, first.text
    tracking_id = first.json()["tracking_id"]
    [(row_id,)] = database.execute_sql(  # the drain's last refused attempt made it dead
        "UPDATE outbox_messages SET status = 'dead', last_error = 'PublishNackedError: nacked' "
        "WHERE tracking_id = %s RETURNING id",
        (tracking_id,),
    ).fetchall()
    database.execute_sql(
        "UPDATE activity_actions SET status = 'failed' WHERE tracking_id = %s", (tracking_id,)
    )

    again = api.post("/v1/trigger/draft-pick", json=body)

    assert again.status_code == 409, again.text
    answer = again.json()
    assert answer["tracking_id"] == tracking_id and "retryable" not in answer
    assert (
        f"kickoff outbox retry-dead {row_id}" in answer["error"] and "new idempotency key" in answer["error"]
    )

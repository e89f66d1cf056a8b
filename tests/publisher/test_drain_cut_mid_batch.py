"""A drain batch whose AMQP connection is cut between two of its flush turns (AmqpLink.FLUSH_EVERY).

The link hands a batch's frames to the socket every FLUSH_EVERY messages while it encodes the rest.
A cut that lands there must leave every row of the batch either published (confirmed before the
cut), pending as uncertain (sent, never confirmed: repeated with the same message id), or pending
as unavailable (never sent: the rest of the batch stops at the turn that finds the link lost).
"""

from __future__ import annotations

from collections import Counter

from harness.faultproxy import FaultProxy
from models.db import database
from publisher.amqp import AmqpPublisher, read_messages
from publisher.amqp_link import AmqpLink
from publisher.drain import ActivityOutbox, drain_outbox
from publisher.outbox import outbox_report
from publisher.outbox_drain import drain_batch
from publisher.queues import LINEUP_UPDATES
from tests.publisher.helpers import due_rows
from tests.waiting import wait_for

BATCH = 20 * AmqpLink.FLUSH_EVERY
#: The batch's hundred (FLUSH_EVERY messages) whose flush turn meets the cut: early, so the turns
#: after it find the link lost before the batch is all encoded, even on a loaded machine.
CUT_AT = 3


def _first_errors() -> dict[str, str]:
    """message id -> the error type its row was left pending with."""
    rows = database.execute_sql(
        "SELECT message_id::text, split_part(last_error, ':', 1) FROM outbox_messages "
        "WHERE status = 'pending'"
    ).fetchall()
    return dict(rows)


def test_a_cut_between_flush_turns_loses_nothing_and_repeats_only_what_was_sent(
    fresh_queues, db, pub_settings, amqp_vhost
):
    ids = due_rows(BATCH)
    # The chunk that carries one of the CUT_AT-th hundred reaches the socket on a flush turn early in
    # the batch (one id of a hundred cannot straddle every chunk).
    flush = AmqpLink.FLUSH_EVERY
    middle = [m.encode() for m in ids[CUT_AT * flush : (CUT_AT + 1) * flush]]
    with FaultProxy(("127.0.0.1", 5672)) as proxy:
        publisher = AmqpPublisher(url=proxy.url_via(amqp_vhost), confirm_timeout=5.0, connect_timeout=2.0)
        try:
            publisher.check_queue(LINEUP_UPDATES)  # connected and checked before the cut is armed
            hit = proxy.cut_on(lambda data: any(m in data for m in middle))
            batch = drain_batch(ActivityOutbox(pub_settings), publisher=publisher, limit=BATCH)
            assert hit.is_set(), "the cut never met the middle of the batch"
            assert batch.batches == 1 and batch.failed > 0 and batch.published + batch.failed == BATCH
            left = _first_errors()
            # sent but never confirmed, and never sent at all: both are there, and neither is a loss
            assert "PublishUncertainError" in left.values()
            never_sent = {m for m, error in left.items() if error == "BrokerConnectionError"}
            assert never_sent, left
            assert all(ids.index(m) >= (CUT_AT + 1) * flush for m in never_sent)  # all after the cut

            def drained() -> bool:
                drain_outbox(publisher=publisher, settings=pub_settings, batch_size=BATCH)
                return outbox_report().backlog == 0

            wait_for(drained, timeout=60, what="the rows left pending to be published after the cut")
        finally:
            publisher.close()
    report = outbox_report()
    assert report.backlog == 0 and report.dead == 0
    copies = Counter(p.message_id for _, p in read_messages(url=amqp_vhost, queue=LINEUP_UPDATES))
    assert set(copies) == set(ids)  # none lost
    assert all(copies[m] == 1 for m in never_sent)  # what was never sent went out once
    repeated = {m for m, n in copies.items() if n > 1}
    assert repeated <= {m for m, error in left.items() if error == "PublishUncertainError"}

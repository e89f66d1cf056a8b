"""The console's Trades page over HTTP: waiting claims, the three actions (operator only), CSRF, escaping."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from publisher import trades
from publisher.amqp import AmqpPublisher
from publisher.trades import redeliver_trades
from tests.publisher.trade_claims import assert_resent, pending_offer, poison, uncertain_offer

pytestmark = pytest.mark.services

BUTTONS = ("Mark published", "Republish", "Cancel")


def _form(claim_key: str, resolution: str, csrf: str | None) -> dict[str, str]:
    data = {"queue": "trade_submissions", "claim_key": claim_key, "resolution": resolution}
    return {**data, "csrf_token": csrf} if csrf else data


def _notice(answer) -> tuple[str, str]:
    query = parse_qs(urlsplit(answer.headers["location"]).query)
    return query["notice"][0], query["kind"][0]


def test_an_operator_sees_the_waiting_claims_each_with_three_confirmed_actions(
    console_server, console_keys, signed_in, publisher, amqp_vhost
):
    lost = uncertain_offer(amqp_vhost, offer_key="offer-1")
    pending_offer(offer_key="offer-spoiled")
    poison("offer-spoiled", body=["spoiled"])
    with AmqpPublisher(url=amqp_vhost) as pub:
        assert redeliver_trades(publisher=pub).set_aside == 1
    pending_offer(offer_key="offer-pending")  # the drain's to send: not listed
    op = signed_in(console_keys["operator"])
    page = op.client.get("/trades")
    assert page.status_code == 200 and page.headers["cache-control"] == "no-store"
    html = page.text
    assert '<a href="/trades">Trades</a>' in html
    rows = re.findall(
        r'<tr data-claim-key="([^"]+)" data-queue="trade_submissions" data-status="(\w+)"', html
    )
    assert rows == [("offer-1", "uncertain"), ("offer-spoiled", "set_aside")]
    assert lost.message_id in html and "not an object" in html and "offer-pending" not in html
    for label in BUTTONS:
        assert html.count(f">{label}<span") == 2
    assert html.count('action="/trades/reconcile" class="action" data-reload data-confirm="') == 6
    assert f"Republish offer-1 with message id {lost.message_id}?" in html
    assert html.count(f'name="csrf_token" value="{op.csrf}"') >= 6


def test_a_read_session_sees_the_claims_without_buttons_and_its_post_is_403(
    console_server, console_keys, signed_in, publisher, amqp_vhost
):
    uncertain_offer(amqp_vhost, offer_key="offer-1")
    rd = signed_in(console_keys["read"])
    html = rd.client.get("/trades").text
    assert 'data-claim-key="offer-1"' in html
    assert "/trades/reconcile" not in html and not any(f">{label}" in html for label in BUTTONS)
    forged = rd.client.post("/trades/reconcile", data=_form("offer-1", "cancel", rd.csrf))
    assert forged.status_code == 403
    assert trades.get_entry("trade_submissions", "offer-1").status == "uncertain"


@pytest.mark.parametrize(
    ("choice", "status", "sent"),
    [
        pytest.param("published", "resolved", False, id="published"),
        pytest.param("republish", "published", True, id="republish"),
        pytest.param("cancel", "cancelled", False, id="cancel"),
    ],
)
def test_each_choice_through_the_console_form(
    console_server, console_keys, signed_in, publisher, amqp_vhost, read_queue, choice, status, sent
):
    lost = uncertain_offer(amqp_vhost, offer_key="offer-1")
    op = signed_in(console_keys["operator"])
    without_token = op.client.post("/trades/reconcile", data=_form("offer-1", choice, None))
    assert without_token.status_code == 403
    assert trades.get_entry("trade_submissions", "offer-1").status == "uncertain"
    done = op.client.post("/trades/reconcile", data=_form("offer-1", choice, op.csrf), follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"].startswith("/trades?")
    notice, kind = _notice(done)
    assert (
        kind == "ok"
        and notice == f"trade_submissions offer-1: {status} ({choice}, message id {lost.message_id})"
    )
    entry = trades.get_entry("trade_submissions", "offer-1")
    assert (entry.status, entry.resolution, entry.resolved_by) == (status, choice, "console console-operator")
    assert_resent(read_queue("trade_submissions"), lost, sent=sent)
    assert 'data-claim-key="offer-1"' not in op.client.get("/trades").text
    again = op.client.post(
        "/trades/reconcile",
        data=_form("offer-1", choice, op.csrf),
        headers={"Accept": "application/json"},
    )
    assert again.status_code == 409 and again.json()["ok"] is False
    assert "not waiting for an operator" in again.json()["message"]


def test_claim_keys_and_errors_are_escaped_on_the_page(
    console_server, console_keys, signed_in, publisher, amqp_vhost
):
    key = 'offer-<b id="x">&"'
    uncertain_offer(amqp_vhost, offer_key=key)
    op = signed_in(console_keys["operator"])
    html = op.client.get("/trades").text
    assert '<b id="x">' not in html
    assert 'data-claim-key="offer-&lt;b id=&#34;x&#34;&gt;&amp;&#34;"' in html
    done = op.client.post(
        "/trades/reconcile", data=_form(key, "cancel", op.csrf), headers={"Accept": "application/json"}
    )
    assert done.status_code == 200 and done.json()["ok"] is True
    assert trades.get_entry("trade_submissions", key).status == "cancelled"

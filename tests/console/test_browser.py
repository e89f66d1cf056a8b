"""The console in a real browser (Playwright driving Debian's Chromium) against a real listener worker.

One browser for the session and one `kickoff serve` (tests/console/browsers.py, the fixtures); each test
has its own browser context
(its own cookies). The listener worker runs the scripted body with the lifecycle tests' short
intervals, so heartbeats, stale badges and stops happen in seconds.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from api.keys import Scope, create_key
from config.clock import utcnow
from harness.background import FirstSeen
from models.db import database
from models.listener_record import MatchListenerRecord
from tests.console.browsers import SLOW  # the browser fixtures: tests/console/browsers.py, via conftest.py
from tests.console.conftest import write_archive
from tests.waiting import wait_for

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.services, pytest.mark.timeout(300)]


def _row(page, match_id: object):
    return page.locator(f'tr[data-match-id="{match_id}"]')


def _mark_page(page) -> None:
    """A marker that a reload or navigation would wipe: the board must update in place."""
    page.evaluate("window.__kickoffSamePage = true")


def _same_page(page) -> bool:
    return page.evaluate("window.__kickoffSamePage === true")


def _dispatch_now(page) -> None:
    page.get_by_role("button", name="Dispatch now").click()
    expect(page.locator("#notice")).to_contain_text("enqueued")


def test_sign_in_refuses_a_wrong_key_then_opens_the_board(browser, console_server, console_keys):
    context = browser.new_context(base_url=console_server.url)
    try:
        page = context.new_page()
        page.goto("/outbox")
        expect(page).to_have_url(re.compile(r"/sign-in\?next=%2Foutbox"))
        page.get_by_label("API key").fill("kk_wrong")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("not valid")
        assert not [c for c in context.cookies() if c["name"].startswith("kickoff_console")]
        page.get_by_label("API key").fill(console_keys["operator"])
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Outbox")).to_be_visible()
        [cookie] = [c for c in context.cookies() if c["name"].startswith("kickoff_console_")]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert page.evaluate("document.cookie") == ""  # HttpOnly: the page's script cannot read it
    finally:
        context.close()


def test_the_queues_page_opens_from_the_nav_and_shows_a_channels_schema(open_console, console_keys):
    import yaml

    contract = yaml.safe_load((Path(__file__).resolve().parents[2] / "docs" / "asyncapi.yaml").read_text())
    [channel, *_] = contract["channels"].values()
    [ref, *_] = channel["messages"].values()
    message = contract["components"]["messages"][ref["$ref"].rsplit("/", 1)[1]]
    payload = contract["components"]["schemas"][message["payload"]["$ref"].rsplit("/", 1)[1]]
    page = open_console(console_keys["read"])
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Queues").click()
    expect(page.get_by_role("heading", name="Queues", exact=True)).to_be_visible()
    page.get_by_role("navigation", name="Queues of the contract").get_by_role(
        "link", name=channel["address"], exact=True
    ).click()
    expect(page).to_have_url(re.compile(f"/queues#queue-{channel['address']}$"))
    section = page.locator(f'section[data-queue="{channel["address"]}"]')
    article = section.locator(f'article[data-message="{message["name"]}"]')
    expect(article.locator("tr[data-field]")).to_have_count(len(payload["properties"]))
    schema = article.locator("pre[data-schema]")
    expect(schema).to_be_hidden()
    article.locator("summary").click()
    expect(schema).to_be_visible()
    expect(schema).to_contain_text('"required"')
    for field in payload["required"]:
        expect(schema).to_contain_text(f'"{field}"')


def test_a_killed_listener_worker_turns_the_badge_stale_live_without_a_reload(
    open_console, console_keys, listener_worker, make_match
):
    match = make_match(status="inprogress")
    worker = listener_worker()
    page = open_console(console_keys["operator"])
    _dispatch_now(page)
    row = _row(page, match.id)
    expect(row).to_have_attribute("data-badge", "Running", timeout=SLOW)
    _mark_page(page)
    worker.kill()
    # The heartbeat stops with the process: Stale past LISTENER_HEARTBEAT_STALE_SECONDS (1.5 s).
    expect(row).to_have_attribute("data-badge", "Stale", timeout=5_000)
    expect(row.locator(".badge")).to_have_text("Stale")
    assert _same_page(page)


def test_stop_closes_the_row_with_15_and_shows_stopped_without_a_reload_start_disabled_while_running(
    open_console, console_keys, listener_worker, make_match, settings, redis_client
):
    from models.coordination import CoordinationStore

    match = make_match(status="inprogress")
    listener_worker()
    page = open_console(console_keys["operator"])
    _dispatch_now(page)
    row = _row(page, match.id)
    expect(row).to_have_attribute("data-badge", "Running", timeout=SLOW)
    start = row.get_by_role("button", name="Start", exact=True)
    expect(start).to_be_disabled()
    expect(row.get_by_role("button", name="Force start")).to_be_enabled()
    _mark_page(page)
    questions: list[str] = []

    def accept(dialog) -> None:
        questions.append(dialog.message)
        dialog.accept()

    page.on("dialog", accept)
    lock = CoordinationStore.from_settings(settings, client=redis_client).locks.start_lock(match.id)
    wait_for(lock.locked, timeout=30, what="the listener holds its start lock")
    with FirstSeen(lambda: not lock.locked()) as released:
        row.get_by_label("Stop reason").fill("drill: stop from the board")
        row.get_by_role("button", name="Stop").click()
        expect(page.locator("#notice")).to_contain_text("rows closed with 15")
        assert questions and "Stop" in questions[0]
        expect(row).to_have_attribute("data-badge", "Stopped", timeout=10_000)
        expect(row.locator(".exit")).to_contain_text("15")
        expect(row.get_by_role("button", name="Dispatch on")).to_be_visible()
        expect(start).to_be_enabled()
        assert _same_page(page)
        released_at = released.wait(30, "the start lock released")
    [record] = list(MatchListenerRecord.select().where(MatchListenerRecord.match == match.id))
    assert record.exit_code == 15 and record.stopped_by == "operator"
    # The stop closes the row itself; the listener thread ends (its lock released) within 2 s of it,
    # timed when the lock went, not after the browser steps.
    ended = (released_at - record.ended_at).total_seconds()
    assert ended <= 2.0, f"listener ended {ended:.2f} s after its row was closed by the stop"
    # The match card's timeline: the run's end, and the stop that caused it (who gave it and why;
    # its entry is written before the stop acts, so it is listed just below the end).
    page.goto(f"/matches/{match.id}")
    timeline = page.locator("ol.timeline li")
    expect(timeline.first).to_have_attribute("data-kind", "run_ended")
    expect(timeline.nth(1)).to_contain_text("listener.stop")
    expect(timeline.nth(1)).to_contain_text("drill: stop from the board")
    expect(page.locator('ol.timeline li[data-kind="run_ended"]').first).to_contain_text("exit 15")


def test_a_clone_with_a_forced_exit_code_shows_that_exit_on_the_board(
    open_console, console_keys, listener_worker, make_match, test_env
):
    source = make_match("nfl", sr_id="sr:match:recorded-1", status="closed", title="BUF @ KC")
    MatchListenerRecord.create(match=source.id, ended_at=utcnow(), exit_code=0)
    write_archive(test_env["DATA_DIR"], "nfl", source.sr_id, events=5)
    listener_worker()
    page = open_console(console_keys["operator"])
    page.get_by_role("link", name="Clone").click()
    page.get_by_label("Recorded match").select_option(source.sr_id)
    page.get_by_label("Listener settings of the clone (one KEY=VALUE per line)").fill(
        "listener_force_exit_code=3"
    )
    expect(page.get_by_label("Start the clone's listener now")).to_be_checked()
    page.get_by_role("button", name="Create clone").click()
    expect(page.locator("#notice")).to_contain_text("clone")
    clone_id = page.locator("dl.fields[data-match-id]").get_attribute("data-match-id")
    assert clone_id and clone_id != str(source.id)
    page.get_by_role("link", name="Listeners").click()
    row = _row(page, clone_id)
    expect(row).to_have_attribute("data-badge", "Ended", timeout=SLOW)
    expect(row.locator(".exit")).to_contain_text(re.compile(r"^\s*3\b"))


def test_retry_of_a_dead_outbox_row(open_console, console_keys, publisher, pub_settings, amqp_vhost):
    from tests.publisher.helpers import dead_lineups

    [tracking_id] = dead_lineups(amqp_vhost, publisher=publisher, settings=pub_settings)
    [(row_id, status)] = database.execute_sql("SELECT id, status FROM outbox_messages").fetchall()
    assert status == "dead"
    page = open_console(console_keys["operator"])
    page.get_by_role("link", name="Outbox").click()
    dead = page.locator(f'table[aria-labelledby="dead"] tr[data-outbox-id="{row_id}"]')
    expect(dead).to_be_visible()
    dead.get_by_role("button", name=re.compile("^Retry")).click()
    expect(page.locator(f'table[aria-labelledby="pending"] tr[data-outbox-id="{row_id}"]')).to_be_visible()
    expect(page.locator(f'table[aria-labelledby="dead"] tr[data-outbox-id="{row_id}"]')).to_have_count(0)
    assert database.execute_sql("SELECT status FROM outbox_messages WHERE id = %s", (row_id,)).fetchone()[
        0
    ] == ("pending")
    page.goto(f"/actions?tracking_id={tracking_id}")
    expect(page.locator("dl.fields").first).to_contain_text("queued")


def test_an_uncertain_trade_claim_is_republished_from_the_trades_page_after_the_confirm_step(
    open_console, console_keys, publisher, amqp_vhost, read_queue
):
    from publisher import trades
    from tests.publisher.trade_claims import uncertain_offer

    lost = uncertain_offer(amqp_vhost, offer_key="offer-1")
    page = open_console(console_keys["operator"])
    page.get_by_role("link", name="Trades").click()
    row = page.locator('tr[data-claim-key="offer-1"]')
    expect(row).to_have_attribute("data-status", "uncertain")
    from axe_playwright_python.sync_playwright import Axe

    found = Axe().run(page)  # with its action buttons (the page check below sees it empty)
    assert found.violations_count == 0, found.generate_report()
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    row.get_by_role("button", name=re.compile("^Cancel")).click()
    wait_for(lambda: asked, timeout=SLOW / 1000, what="the confirm step of Cancel")
    assert asked == ["Cancel offer-1? It is never sent; its key stays claimed."]
    assert trades.get_entry("trade_submissions", "offer-1").status == "uncertain"  # dismissed: nothing done
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    row.get_by_role("button", name=re.compile("^Republish")).click()
    expect(page.locator('tr[data-claim-key="offer-1"]')).to_have_count(0, timeout=SLOW)
    assert (
        asked[1]
        == f"Republish offer-1 with message id {lost.message_id}? The worker drops a duplicate by that id."
    )
    expect(page.get_by_text("No trade claim waits for an operator.")).to_be_visible()
    entry = trades.get_entry("trade_submissions", "offer-1")
    assert (entry.status, entry.resolution) == ("published", "republish")
    [(_, props)] = read_queue("trade_submissions")
    assert props.message_id == lost.message_id


def test_a_post_without_the_csrf_token_is_refused(open_console, console_keys, make_match):
    match = make_match(auto_dispatch_listener=True)
    page = open_console(console_keys["operator"])
    status = page.evaluate(
        """async (url) => {
             const answer = await fetch(url, {method: "POST", body: new URLSearchParams({on: "0"})});
             return answer.status;
           }""",
        f"/matches/{match.id}/auto-dispatch",
    )
    assert status == 403
    stripped = page.evaluate(
        """async () => {
             const form = document.querySelector('form[action="/board/sweep"]');
             form.querySelector('input[name="csrf_token"]').remove();
             const body = new URLSearchParams(new FormData(form));
             const answer = await fetch(form.action, {method: "POST", body: body});
             return answer.status;
           }"""
    )
    assert stripped == 403
    from models.match import Match

    assert Match.get_by_id(match.id).auto_dispatch_listener is True


def test_a_read_session_sees_rows_but_no_action_buttons_and_its_forged_post_is_403(
    open_console, console_keys, make_match
):
    match = make_match(status="inprogress")
    MatchListenerRecord.create(match=match.id)
    page = open_console(console_keys["read"])
    expect(_row(page, match.id)).to_have_attribute("data-badge", re.compile(r"^(Running|Late|Stale)$"))
    for name in ("Start", "Force start", "Stop", "Dispatch on", "Dispatch off", "Dispatch now", "Sweep now"):
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    status = page.evaluate(
        """async (url) => {
             const csrf = document.getElementById("main").dataset.csrf;
             const answer = await fetch(url, {method: "POST", headers: {"X-CSRF-Token": csrf}});
             return answer.status;
           }""",
        f"/matches/{match.id}/stop",
    )
    assert status == 403
    assert MatchListenerRecord.get(MatchListenerRecord.match == match.id).ended_at is None


def _every_page(match_id: object) -> tuple[str, ...]:
    """Every console page an operator opens (the accessibility and CSP checks visit each)."""
    return (
        "/",
        "/matches",
        "/history",
        f"/matches/{match_id}",
        "/outbox",
        "/runs",
        "/runs/new?job=fail",
        "/clone",
        "/actions",
        "/trades",
        "/queues",
        "/audit",
    )


def test_every_console_page_passes_the_axe_accessibility_check(open_console, console_keys, make_match):
    from axe_playwright_python.sync_playwright import Axe

    match = make_match(status="inprogress", sr_id="sr:match:a11y")
    MatchListenerRecord.create(match=match.id)
    operator = create_key(name="a11y", scope=Scope.OPERATOR)[1]
    page = open_console(operator)
    expect(_row(page, match.id)).to_be_visible()
    axe = Axe()
    for path in _every_page(match.id):
        page.goto(path)
        found = axe.run(page)
        assert found.violations_count == 0, f"{path}: {found.generate_report()}"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent").strip() == "Skip to content"


def test_every_page_and_the_docs_run_under_the_csp_without_a_violation(open_console, make_match):
    match = make_match(status="inprogress", sr_id="sr:match:csp")
    MatchListenerRecord.create(match=match.id)
    page = open_console(create_key(name="csp", scope=Scope.OPERATOR)[1])
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    for path in _every_page(match.id):
        answer = page.goto(path)
        assert answer.headers["content-security-policy"].startswith("default-src 'self'"), path
        page.wait_for_load_state("load")
    # The board's script runs under the CSP: its live stream fills the rows.
    page.goto("/")
    expect(_row(page, match.id)).to_be_visible()
    page.goto("/docs")
    expect(page.get_by_text("/v1/trigger/lineup").first).to_be_visible(timeout=SLOW)
    assert refused == []


def test_a_bulk_action_previews_its_matches_then_acts_after_the_confirm_step(
    open_console, console_keys, make_match
):
    from axe_playwright_python.sync_playwright import Axe

    from models.match import Match

    first = make_match("bulkui", status="inprogress", sr_id="sr:match:bulk-1")
    second = make_match("bulkui", status="inprogress", sr_id="sr:match:bulk-2")
    page = open_console(console_keys["operator"])
    page.get_by_label("Bulk action", exact=True).select_option("stop")
    page.get_by_label("on league", exact=True).select_option("bulkui")
    page.get_by_label("status", exact=True).select_option("inprogress")
    page.locator("#b-reason").fill("drill")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_role("heading", name="Bulk stop")).to_be_visible()
    expect(page.locator("#bulk-count")).to_contain_text("2 matches fit the filter")
    axe = Axe()
    found = axe.run(page)
    assert found.violations_count == 0, found.generate_report()
    assert Match.get_by_id(first.id).auto_dispatch_listener  # the preview changed nothing
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.get_by_role("button", name="Confirm: stop 2 matches").click()
    expect(page.locator("#bulk-done")).to_contain_text("2 done, 0 failed")
    assert asked == ["stop 2 matches?"]
    found = axe.run(page)
    assert found.violations_count == 0, found.generate_report()
    assert not Match.get_by_id(first.id).auto_dispatch_listener
    assert not Match.get_by_id(second.id).auto_dispatch_listener
    from models.audit import audit_entries

    stops = audit_entries(action="listener.stop")
    assert {e.target_id for e in stops} == {str(first.id), str(second.id)}
    assert {e.reason for e in stops} == {"drill"} and {e.who for e in stops} == {"console-operator"}


def test_the_audit_page_opens_from_the_nav_and_filters_by_who_action_and_match(
    open_console, console_keys, make_match
):
    from models.audit import Actor, record_audit

    one, two = make_match(), make_match()
    bot = Actor.api_key(str(uuid.uuid4()), "bot")
    record_audit(actor=bot, action="match.edit", target_kind="match", target_id=str(one.id), reason="r1")
    record_audit(actor=bot, action="listener.stop", target_kind="match", target_id=str(two.id), reason="r2")
    record_audit(actor=Actor.cli(), action="match.edit", target_kind="match", target_id=str(two.id))
    page = open_console(console_keys["read"])
    page.get_by_role("link", name="Audit").click()
    rows = page.locator("tr[data-action]")
    expect(page.locator('tr[data-action="match.edit"]')).to_have_count(2)  # and this sign-in's entry
    page.get_by_label("Who").fill("bot")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    page.get_by_label("Match").fill(two.sr_id)
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-action", "listener.stop")
    expect(rows.first).to_contain_text("r2")
    page.get_by_label("Who").fill("")
    page.get_by_label("Action").fill("match.edit")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    expect(page.get_by_label("Match")).to_have_value(two.sr_id)  # the filters stay filled in

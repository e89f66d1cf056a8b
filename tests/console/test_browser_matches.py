"""The Matches board and the History page in a real browser (Playwright, Debian's Chromium) against real
workers: a match that never had a run is started and its dispatch turned off and on from its row, and
every chart draws the points a run of real listener, default and launcher processes wrote."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest

from config.clock import utcnow
from models import League
from models.event_log import log_summary, pages_of
from models.history import history
from models.history_series import SERIES
from models.listener_record import MatchListenerRecord
from models.team import Team
from srsim.server import SimServer
from tests import intervals
from tests.api.conftest import bearer
from tests.console.browsers import SLOW
from tests.lifecycle.conftest import WorkerProcess
from tests.lifecycle.helpers import mlb_games
from tests.lifecycle.test_worker_e2e import WORKER_ENV
from tests.waiting import wait_for

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.services, pytest.mark.timeout(420)]


def _kc_match(make_match):
    """HOU @ KC, due tomorrow, never started; the league's teams known (the search finds "Royals")."""
    league, _ = League.get_or_create(name="mlb")
    Team.get_or_create(
        league=league, sr_id="sr:team:hou", defaults={"alias": "HOU", "market": "Houston", "name": "Astros"}
    )
    Team.get_or_create(
        league=league, sr_id="sr:team:kc", defaults={"alias": "KC", "market": "Kansas City", "name": "Royals"}
    )
    return make_match("mlb", title="HOU @ KC", status="scheduled", scheduled=utcnow() + timedelta(days=1))


def test_the_matches_board_lists_a_never_run_match_due_tomorrow_and_starts_and_dispatches_it(
    open_console, console_keys, listener_worker, make_match
):
    from axe_playwright_python.sync_playwright import Axe

    match = _kc_match(make_match)
    other = make_match("nhl", title="STL @ NSH", status="scheduled", scheduled=utcnow() + timedelta(hours=3))
    listener_worker()
    page = open_console(console_keys["operator"])
    page.get_by_role("navigation", name="Console").get_by_role("link", name="Matches").click()
    expect(page.get_by_role("heading", name="Matches", exact=True)).to_be_visible()
    row = page.locator(f'tr[data-match-id="{match.id}"]')
    expect(row).to_have_attribute("data-badge", "-")
    expect(row.locator(".badge")).to_have_text("no run")
    expect(row.get_by_role("link", name="HOU @ KC")).to_be_visible()
    expect(page.locator(f'tr[data-match-id="{other.id}"]')).to_be_visible()
    found = Axe().run(page)
    assert found.violations_count == 0, found.generate_report()

    # search by a team's name: the title only says KC
    page.get_by_label("Search").fill("Royals")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"q=Royals"))
    expect(page.locator("#board-rows tr[data-match-id]")).to_have_count(1)
    expect(row).to_be_visible()

    # Dispatch off then on, from the row, live (no reload)
    page.evaluate("window.__kickoffSamePage = true")
    row.get_by_label("Dispatch reason").fill("checking the feed")
    row.get_by_role("button", name="Dispatch off").click()
    expect(page.locator("#notice")).to_contain_text("auto-dispatch off")
    expect(row).to_have_attribute("data-dispatch", "off", timeout=SLOW)
    row.get_by_role("button", name="Dispatch on").click()
    expect(row).to_have_attribute("data-dispatch", "on", timeout=SLOW)

    # Start: the listener worker runs it, and the row turns Running without a reload
    row.get_by_role("button", name="Start", exact=True).click()
    expect(page.locator("#notice")).to_contain_text("enqueued")
    expect(row).to_have_attribute("data-badge", "Running", timeout=SLOW)
    expect(row.get_by_role("button", name="Start", exact=True)).to_be_disabled()
    assert page.evaluate("window.__kickoffSamePage === true")
    [run] = MatchListenerRecord.select().where(MatchListenerRecord.match == match.id)
    assert run.ended_at is None
    found = Axe().run(page)
    assert found.violations_count == 0, found.generate_report()

    # keyboard: the search box, then Filter, reached with Tab
    page.get_by_label("Search").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('name')") == "sort"


def test_a_bad_filter_is_a_message_on_the_page_not_an_error_page(open_console, console_keys, make_match):
    _kc_match(make_match)
    page = open_console(console_keys["read"])
    answer = page.goto("/matches?from=2030-02-30&q=%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert answer.status == 422
    expect(page.get_by_role("alert")).to_contain_text("from must be a date like 2030-09-07")
    expect(page.get_by_label("Search")).to_have_value("<script>alert(1)</script>")
    answer = page.goto("/matches?page=40")
    assert answer.status == 422
    expect(page.get_by_role("alert")).to_contain_text("page 40 is past the end")
    page.get_by_role("link", name="Go to the first page").click()
    expect(page.locator("#board-rows tr[data-match-id]")).to_have_count(1)


@pytest.fixture
def feed() -> Iterator[callable]:
    servers: list[SimServer] = []

    def start(games) -> SimServer:
        server = SimServer(games, heartbeat_seconds=1.0).start_background()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def processes(console_env, tmp_path) -> Iterator[callable]:
    """``processes(kind, env)``: real worker (``listeners``/``default``) and launcher processes, killed at
    the end; the run's start messages removed after."""
    from tests.api.conftest import _delete_broker_namespace

    started: list = []

    def start(kind: str, env: dict[str, str]):
        log = tmp_path / f"{kind}{len(started)}.log"
        if kind == "launcher":
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "cli", "launcher", "--cap", "2"], env=env, stdout=out, stderr=out
                )
            started.append(proc)
            return proc
        queues = ("match_listeners",) if kind == "listeners" else ("default",)
        worker = WorkerProcess(env, log, queues=queues, threads=4)
        started.append(worker)
        worker.wait_ready(timeout=SLOW / 1000)
        return worker

    yield start
    for proc in started:
        if isinstance(proc, WorkerProcess):
            proc.close()
        else:
            proc.kill()
            proc.wait(timeout=10)
    _delete_broker_namespace(console_env)


def _enqueue_rollup(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "cli", "enqueue", "rollup_history"], env=env, check=True, capture_output=True
    )


def _points(name: str) -> float:
    answer = history(name, range_name="1h", top=50)
    return sum(v for line in answer.values.values() for v in line if v)


def test_each_history_chart_draws_what_a_run_of_real_workers_wrote(
    browser, console_server, console_env, console_keys, make_match, feed, processes, fresh_queues
):
    [game] = mlb_games(1, events=200, interval=0.25)
    server = feed([game])
    match = make_match("mlb", sr_id=game.sr_id, title="HOU @ KC", status="inprogress")
    env = {
        **console_env,
        **WORKER_ENV,
        **intervals.env("real_worker"),
        "LISTENER_BODY": "listener.match_listener:MatchListener",
        "SPORTRADAR_BASE_URL": server.base_url,
        "LISTENER_MAX_CONSECUTIVE_HEARTBEATS": "120",
        "HISTORY_FLUSH_SECONDS": "0.5",
        "APP_ENV": "staging",  # the takeover restarts a live match (develop restarts test clones only)
    }
    first = processes("listeners", env)
    processes("default", env)
    api = httpx.Client(base_url=console_server.url, timeout=60)
    started = api.post(
        f"/v1/matches/{match.id}/start-listener", json={}, headers=bearer(console_keys["operator"])
    )
    assert started.status_code == 202, started.text
    wait_for(lambda: log_summary(match.id).events >= 20, timeout=90, what="20 events in the event log")

    # a takeover: the first worker is killed, then a second one starts and takes the match over (a gap,
    # 14, a new run); the feed goes on while the second boots (about a second at 4 events/s), so its
    # run recovers messages nobody streamed (with a standby up, the takeover can be quicker than an event)
    first.kill()
    processes("listeners", env)
    wait_for(
        lambda: (
            MatchListenerRecord.select()
            .where(MatchListenerRecord.match == match.id, MatchListenerRecord.ended_at.is_null(False))
            .exists()
            and MatchListenerRecord.select()
            .where(MatchListenerRecord.match == match.id, MatchListenerRecord.ended_at.is_null())
            .exists()
        ),
        timeout=90,
        what="the run taken over",
    )

    # triggers: one published, one held behind it (a pending outbox row); a job run by the launcher
    trigger = bearer(console_keys["trigger"])
    ir = api.post(
        "/v1/trigger/lineup",
        json={
            "league_id": "L1",
            "team_id": "7",
            "swaps": [{"player_id": 4362628, "to_slot": "IR", "kind": "ir"}],
        },
        headers=trigger,
    )
    assert ir.status_code == 202, ir.text
    held = api.post(
        "/v1/trigger/waiver",
        json={
            "league_id": "L1",
            "team_id": "7",
            "add_player_id": 4430807,
            "after_tracking_id": ir.json()["tracking_id"],
        },
        headers=trigger,
    )
    assert held.status_code == 202 and held.json()["held"], held.text
    run = api.post("/v1/runs", json={"job": "noop", "params": {}}, headers=trigger)
    assert run.status_code == 202, run.text
    processes("launcher", env)

    # the rollup, sent to the default worker until every series has points
    seen: dict[str, float] = {}

    def every_series_has_points() -> bool:
        _enqueue_rollup(env)
        seen.update({name: _points(name) for name in SERIES})
        return all(seen.values())

    try:
        wait_for(every_series_has_points, timeout=180, interval=5, what="every series with points")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; points by series: {seen}") from exc

    context = browser.new_context(base_url=console_server.url, viewport={"width": 1366, "height": 768})
    try:
        page = context.new_page()
        page.goto("/sign-in")
        page.get_by_label("API key").fill(console_keys["read"])
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("navigation", name="Console").get_by_role("link", name="History").click()
        expect(page.get_by_role("heading", name="History", exact=True)).to_be_visible()
        charts = page.locator("[data-chart]")
        expect(charts).to_have_count(len(SERIES))
        for name in SERIES:
            plot = page.locator(f'figure[data-series="{name}"] [data-chart]')
            expect(plot).to_have_attribute("data-drawn", re.compile(r"^[1-9]\d*$"), timeout=SLOW)
            expect(plot.locator("canvas")).to_have_count(1)
            expect(page.locator(f'figure[data-series="{name}"] ul.legend li').first).to_be_visible()
        labels = page.locator('figure[data-series="events"] ul.legend')
        expect(labels).to_contain_text("HOU @ KC (mlb)")
        from axe_playwright_python.sync_playwright import Axe

        found = Axe().run(page)
        assert found.violations_count == 0, found.generate_report()
        page.goto(f"/matches/{match.id}")
        card = page.locator('figure[data-series="events"] [data-chart]')
        expect(card).to_have_attribute("data-drawn", re.compile(r"^[1-9]\d*$"), timeout=SLOW)
        # The game's record on the card is the event log's, newest first; a message the successor
        # recovered (the feed's replay or the play-by-play) is shown as such.
        rows = page.locator("table.record tbody tr")
        expect(rows.first).to_be_visible()
        shown = [(int(r.get_attribute("data-seq")), r.get_attribute("data-kind")) for r in rows.all()]
        logged = {row.seq: row.kind for batch in pages_of(match.id) for row in batch}
        # The newest page when the card was drawn (the game goes on: rows logged since are newer).
        newest = sorted(((q, k) for q, k in logged.items() if q <= shown[0][0]), reverse=True)
        assert shown == newest[:50]
        recovered = min(seq for seq, kind in logged.items() if kind in ("resumed", "backfilled"))
        page.goto(f"/matches/{match.id}?before={recovered + 1}#record")
        first = page.locator("table.record tbody tr").first
        expect(first).to_have_attribute("data-seq", str(recovered))
        expect(first.locator("td").nth(4)).to_have_text(logged[recovered])
        first.get_by_text("raw").click()  # the raw message, one click away
        expect(first.locator("pre")).to_be_visible()
        found = Axe().run(page)
        assert found.violations_count == 0, found.generate_report()
    finally:
        context.close()
        api.close()

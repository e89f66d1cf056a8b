"""The match card's stream timeline in a real browser (Playwright, Debian's Chromium): a gap the data has
is drawn where it is (a run's ``gap`` marker in the event log, and the pause between two runs), the run's
stream around it, the page accessible (axe) and under the CSP."""

from __future__ import annotations

from datetime import timedelta

import pytest

from config.clock import utcnow
from models.listener_record import MatchListenerRecord
from tests.logged import event_log_of

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.services, pytest.mark.timeout(300)]


def _fraction(page, selector: str) -> tuple[float, float]:
    """Where ``selector``'s box is on the timeline: (left, width) as fractions of the bar's width."""
    bar = page.locator("svg.stream-bar").bounding_box()
    box = page.locator(selector).bounding_box()
    return (box["x"] - bar["x"]) / bar["width"], box["width"] / bar["width"]


def _drawn_at(page, fraction: float) -> str:
    """The class of what the bar draws at ``fraction`` of its width, half-way down the run's band."""
    return page.evaluate(
        """(f) => {
            const bar = document.querySelector("svg.stream-bar").getBoundingClientRect();
            const run = document.querySelector("svg.stream-bar rect.stream-run").getBoundingClientRect();
            const hit = document.elementFromPoint(bar.left + f * bar.width, run.top + run.height / 2);
            return hit ? hit.getAttribute("class") || hit.tagName : "";
        }""",
        fraction,
    )


def test_the_card_draws_a_stream_gap_and_the_pause_between_runs_where_the_data_has_them(
    open_console, console_keys, make_match
):
    from axe_playwright_python.sync_playwright import Axe

    match = make_match("mlb", title="HOU @ KC", status="closed", sr_id="sr:match:gaps")
    t0 = (utcnow() - timedelta(hours=3)).replace(microsecond=0)
    at = lambda minutes: t0 + timedelta(minutes=minutes)  # noqa: E731
    first = MatchListenerRecord.create(
        match=match.id,
        created_at=at(0),
        heartbeat_at=at(40),
        ended_at=at(40),
        exit_code=0,
        gaps=1,
        gap_seconds=600.0,
    )
    MatchListenerRecord.create(
        match=match.id, created_at=at(60), heartbeat_at=at(100), ended_at=at(100), exit_code=0
    )
    log = event_log_of(match.id)
    log.record_id = str(first.id)
    log.append_marker(
        "gap",
        cause="reconnect",
        began=at(10).isoformat(),
        ended=at(20).isoformat(),
        seconds=600.0,
        how="reconnected",
        number=1,
    )
    log.close()

    page = open_console(console_keys["read"])
    answer = page.goto(f"/matches/{match.id}")
    assert answer.status == 200
    expect(page.get_by_role("heading", name="Stream and gaps")).to_be_visible()
    # 100 minutes from the first run's start to the second's end: the reconnect is 10 % to 20 % of
    # the bar, the pause without a listener 40 % to 60 %.
    left, width = _fraction(page, "rect.stream-gap[data-kind='stream gap']")
    assert left == pytest.approx(0.10, abs=0.01) and width == pytest.approx(0.10, abs=0.01)
    left, width = _fraction(page, "rect.stream-gap[data-kind='no listener']")
    assert left == pytest.approx(0.40, abs=0.01) and width == pytest.approx(0.20, abs=0.01)
    # What the eye sees at each place: the gaps over the runs' stream, the stream elsewhere.
    assert "stream-gap" in _drawn_at(page, 0.15)
    assert "gap-no-listener" in _drawn_at(page, 0.50)
    for fraction in (0.05, 0.30, 0.80):
        assert "stream-run" in _drawn_at(page, fraction), fraction
    rows = page.locator("table.stream-gaps tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("reconnect: reconnected")
    expect(rows.nth(0)).to_contain_text("600.0")
    expect(rows.nth(1)).to_contain_text("no listener")
    found = Axe().run(page)
    assert found.violations_count == 0, found.generate_report()


def test_a_card_without_a_run_says_nothing_streamed(open_console, console_keys, make_match):
    match = make_match("mlb", title="HOU @ KC", status="scheduled", sr_id="sr:match:no-gaps")
    page = open_console(console_keys["read"])
    page.goto(f"/matches/{match.id}")
    expect(page.get_by_text("No run yet: nothing streamed.")).to_be_visible()
    expect(page.locator("svg.stream-bar")).to_have_count(0)

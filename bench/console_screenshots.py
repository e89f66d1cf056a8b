"""Screenshots of the operator console: every page at 1366x768 and at a phone's width (390x844).

Sets up a demo-like deployment on a throw-away database, vhost, Redis prefix and data directory:
`kickoff serve`, srsim (in this process) playing two MLB games, a real listener worker following
them (the listener body, not a script), a launcher, and matches in the states operators meet
(Running, Stopped, Stale, Abandoned then running again, a clone that exited with a forced code,
games of the next days that never had a listener); triggers and a job run give the history its
publishes and runs, and the rollup is run every 20 s while the games play. Then it signs in
with Chromium (Playwright) and saves, in --out (default docs/):

  console-board.png, console-match.png, console-matches.png, console-history.png  (1366 wide,
  whole page: the README and docs/console.md show them)

and, with --pages DIR, every page at both sizes (what fits the screen: 1366x768 and 390x844)
as DIR/{page}-{wide|phone}.png, for a person to look through. Everything it made is removed at
the end.

Run (from the repository root): .venv/bin/python bench/console_screenshots.py [--out docs] [--pages DIR]
Needs /usr/bin/chromium (apt-get install -y chromium) and the local services. Exit 1 unless the
docs' four PNG files were written (``--json``: one JSON object saying which).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from api.keys import Scope, create_key
from bench._setup import REPO, bench_environment, serve_api
from bench._verdict import Bench, Goal
from bench.recovery import listener_worker
from config.clock import utcnow
from lifecycle.history import rollup_history
from listener.archive import TextLog, archive_path, shortcode_for
from models import League, Match
from models.coordination import CoordinationStore, connect_redis
from models.db import database
from models.listener_record import MatchListenerRecord
from models.team import Team
from publisher.queues import TRIGGER_QUEUES
from srsim.script import GameScript
from srsim.server import SimServer

CHROMIUM = "/usr/bin/chromium"
SHOTS = ("console-board.png", "console-matches.png", "console-history.png", "console-match.png")
BENCH = Bench("console_screenshots", __doc__, [Goal("written", len(SHOTS), at_most=False, unit="files")])
WIDE = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}
TEAMS = {
    "mlb": (
        ("HOU", "Houston", "Astros"),
        ("KC", "Kansas City", "Royals"),
        ("NYY", "New York", "Yankees"),
        ("BOS", "Boston", "Red Sox"),
        ("SEA", "Seattle", "Mariners"),
        ("OAK", "Oakland", "Athletics"),
    ),
    "nhl": (
        ("STL", "St. Louis", "Blues"),
        ("NSH", "Nashville", "Predators"),
        ("TOR", "Toronto", "Maple Leafs"),
    ),
    "nfl": (("BUF", "Buffalo", "Bills"), ("KC", "Kansas City", "Chiefs"), ("PHI", "Philadelphia", "Eagles")),
}


def _matches(games: dict[str, GameScript]) -> dict[str, Match]:
    """The demo's matches and their past runs (what a few days of operation leave behind)."""
    now = utcnow()
    leagues = {name: League.get_or_create(name=name)[0] for name in TEAMS}
    for name, teams in TEAMS.items():
        for alias, market, team in teams:
            Team.create(
                league=leagues[name], sr_id=f"sr:team:{name}-{alias}", alias=alias, market=market, name=team
            )

    def match(league: str, sr_id: str, title: str, status: str, minutes: float, **kw: object) -> Match:
        return Match.create(
            league=leagues[league],
            sr_id=sr_id,
            title=title,
            status=status,
            scheduled=now - timedelta(minutes=minutes),
            **kw,
        )

    made = {
        "running": match("mlb", games["running"].sr_id, "HOU @ KC", "inprogress", 70),
        "stopped": match("mlb", games["stopped"].sr_id, "NYY @ BOS", "inprogress", 65),
        "stale": match("mlb", "sr:match:60001", "SEA @ OAK", "inprogress", 120, auto_dispatch_listener=False),
        "ended": match("nhl", "sr:match:50001", "STL @ NSH", "closed", 300),
        "clone": match(
            "nhl",
            str(uuid.uuid4()),
            "clone of STL @ NSH",
            "scheduled",
            2,
            is_test=True,
            listener_start_settings={"listener_force_exit_code": 3},
        ),
    }
    # the games of the next days: never had a listener (the Matches board lists them, the listener board not)
    for n, (league, title) in enumerate(
        [
            ("mlb", "KC @ NYY"),
            ("mlb", "BOS @ SEA"),
            ("nfl", "BUF @ KC"),
            ("nfl", "PHI @ BUF"),
            ("nhl", "TOR @ STL"),
        ]
        * 3
    ):
        match(league, f"sr:match:7{n:04d}", title, "scheduled", -(180 + 400 * n))
    # An earlier run of the running match that a dead worker left: abandoned by the sweep.
    before = now - timedelta(minutes=40)
    MatchListenerRecord.create(
        match=made["running"].id,
        created_at=before - timedelta(minutes=25),
        heartbeat_at=before,
        ended_at=before + timedelta(minutes=3),
        exit_code=14,
        exit_reason="abandoned",
        stopped_by="sweep",
    )
    MatchListenerRecord.create(
        match=made["ended"].id,
        created_at=now - timedelta(hours=5),
        heartbeat_at=now - timedelta(hours=2),
        ended_at=now - timedelta(hours=2),
        exit_code=0,
        exit_reason="game over",
    )
    return made


def _stale_run(match: Match) -> None:
    """An open row whose worker died nine minutes ago (made after the dispatch, which would abandon it)."""
    old = utcnow() - timedelta(minutes=9)
    MatchListenerRecord.create(match=match.id, created_at=old - timedelta(minutes=50), heartbeat_at=old)


def _activity(url: str, key: str) -> None:
    """Triggers (published, and one held behind an IR move) and a job run, through the API."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as api:
        for n in range(12):
            body = {"league_id": "L1", "team_id": str(n), "swaps": [{"player_id": 1000 + n, "to_slot": "BE"}]}
            api.post("/v1/trigger/lineup", json=body)
        ir = api.post(
            "/v1/trigger/lineup",
            json={
                "league_id": "L1",
                "team_id": "7",
                "swaps": [{"player_id": 4362628, "to_slot": "IR", "kind": "ir"}],
            },
        ).json()
        api.post(
            "/v1/trigger/waiver",
            json={
                "league_id": "L1",
                "team_id": "7",
                "add_player_id": 4430807,
                "after_tracking_id": ir["tracking_id"],
            },
        )
        for _ in range(3):
            api.post("/v1/runs", json={"job": "noop", "params": {}})


def _shoot(page, path: str, out: Path, *, full: bool) -> None:
    page.goto(path)
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(1200)  # the live rows and the charts drawn
    page.screenshot(path=str(out), full_page=full)


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="Directory of the docs' PNG files.")
    parser.add_argument("--pages", type=Path, default=None, help="Also every page at both sizes, here.")
    parser.add_argument("--play", type=float, default=150.0, help="Seconds the games play before the shots.")
    args = parser.parse_args()
    with BENCH.output(args):
        began = time.time()
        error = None
        try:
            shoot(args)
        except Exception as exc:  # reported in the result (exit 1), with its traceback on stderr
            traceback.print_exc()
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        written = [n for n in SHOTS if (args.out / n).is_file() and (args.out / n).stat().st_mtime >= began]
        figures = {"written": len(written), "files": [str(args.out / n) for n in written], "error": error}
        return BENCH.finish(args, figures)


def shoot(args: argparse.Namespace) -> None:
    """Play the games, then save the screenshots (see the module docstring)."""
    from playwright.sync_api import expect, sync_playwright

    tag = uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix="kickoff-shots-"))
    games = {
        name: GameScript(
            sr_id=str(uuid.uuid4()),
            league="mlb",
            title=title,
            is_test=False,
            start_after=2.0,
            event_interval=0.5,
            event_count=600,
            corrections=3,
            deletes=1,
        )
        for name, title in (("running", "HOU @ KC"), ("stopped", "NYY @ BOS"))
    }
    feed = SimServer(list(games.values()), heartbeat_seconds=1.0).start_background()
    with bench_environment() as settings:
        env = {
            "DATABASE_URL": settings.database_url,
            "AMQP_URL": settings.amqp_url,
            "REDIS_KEY_PREFIX": f"kickoffshots:{tag}:",
            "BROKER_NAMESPACE": f"kickoffshots-{tag}",
            "DATA_DIR": str(tmp),
            "APP_ENV": "develop",
            "LISTENER_BODY": "listener.match_listener:MatchListener",
            "SPORTRADAR_BASE_URL": feed.base_url,
            "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "2",
            "HISTORY_FLUSH_SECONDS": "1",
            "LOG_LEVEL": "WARNING",
        }
        os.environ.update(env)
        made = _matches(games)
        key = create_key(name="ops-console", scope=Scope.OPERATOR)[1]
        worker = listener_worker({**os.environ}, tmp / "listener-worker.log")
        server, url = serve_api(env)
        with open(tmp / "launcher.log", "wb") as log:
            launcher = subprocess.Popen(
                [sys.executable, "-m", "cli", "launcher", "--cap", "2"],
                cwd=REPO,
                env={**os.environ},
                stdout=log,
                stderr=log,
            )
        coordination = CoordinationStore.from_settings(
            settings.model_copy(update={"redis_key_prefix": env["REDIS_KEY_PREFIX"]})
        )

        def rollup() -> None:
            rollup_history(settings=settings, coordination=coordination, queues=TRIGGER_QUEUES, now=utcnow())
            database.close()

        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM)
                page = browser.new_page(viewport=WIDE, base_url=url)
                page.on("dialog", lambda dialog: dialog.accept())
                page.goto("/sign-in")
                page.get_by_label("API key").fill(key)
                page.get_by_role("button", name="Sign in").click()
                page.get_by_role("button", name="Dispatch now").click()

                def row(name: str):
                    return page.locator(f'tr[data-match-id="{made[name].id}"]')

                for name in ("running", "stopped"):
                    expect(row(name)).to_have_attribute("data-badge", "Running", timeout=90_000)
                expect(row("clone")).to_have_attribute("data-badge", "Ended", timeout=90_000)
                _activity(url, key)
                deadline = time.monotonic() + args.play
                stopped_at = time.monotonic() + args.play / 2
                while time.monotonic() < deadline:
                    rollup()
                    if stopped_at and time.monotonic() > stopped_at:
                        row("stopped").get_by_label("Stop reason").fill("feed test over")
                        row("stopped").get_by_role("button", name="Stop").click()
                        expect(row("stopped")).to_have_attribute("data-badge", "Stopped", timeout=30_000)
                        stopped_at = 0.0
                    time.sleep(20)
                rollup()
                _stale_run(made["stale"])
                expect(row("stale")).to_have_attribute("data-badge", "Stale", timeout=30_000)
                [running] = MatchListenerRecord.select().where(
                    MatchListenerRecord.match == made["running"].id, MatchListenerRecord.ended_at.is_null()
                )
                log = TextLog.for_run(
                    archive_path(tmp, "mlb", shortcode_for(made["running"].sr_id)), str(running.id)
                )
                log.write("heartbeat ok (lock extended)")
                args.out.mkdir(parents=True, exist_ok=True)
                card = f"/matches/{made['running'].id}"
                for path, name in (
                    ("/", "board"),
                    ("/matches", "matches"),
                    ("/history", "history"),
                    (card, "match"),
                ):
                    _shoot(page, path, args.out / f"console-{name}.png", full=True)
                if args.pages is not None:
                    args.pages.mkdir(parents=True, exist_ok=True)
                    every = {
                        "board": "/",
                        "matches": "/matches",
                        "matches-search": "/matches?q=Royals",
                        "history": "/history",
                        "history-24h": "/history?range=24h",
                        "match": card,
                        "clone": "/clone",
                        "outbox": "/outbox",
                        "actions": "/actions",
                        "trades": "/trades",
                        "runs": "/runs",
                        "queues": "/queues",
                        "audit": "/audit",
                    }
                    for size, viewport in (("wide", WIDE), ("phone", PHONE)):
                        page.set_viewport_size(viewport)
                        for name, path in every.items():
                            _shoot(page, path, args.pages / f"{name}-{size}.png", full=False)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
            worker.terminate(timeout=30)
            launcher.terminate()
            launcher.wait(timeout=30)
            feed.stop()
            for url_name, pattern in (
                ("REDIS_URL", env["REDIS_KEY_PREFIX"]),
                ("BROKER_URL", env["BROKER_NAMESPACE"]),
            ):
                client = connect_redis(getattr(settings, url_name.lower()))
                keys = list(client.scan_iter(match=f"{pattern}*", count=1000))
                if keys:
                    client.delete(*keys)
    print(f"wrote console-board, -matches, -history and -match .png in {args.out}")
    if args.pages is not None:
        print(f"and every page at 1366x768 and 390x844 in {args.pages}")


if __name__ == "__main__":
    sys.exit(main())

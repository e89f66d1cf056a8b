"""Screenshots of the operator console for the docs: the listeners board and a match card.

Sets up a demo-like deployment on a throw-away database, vhost, Redis prefix and data directory:
`kickoff serve`, one real listener worker (the scripted listener body), a few matches in the
states operators meet (Running, Stopped, Stale, Abandoned then running again, a clone that
exited with a forced code), then signs in with Chromium (Playwright) and saves
docs/console-board.png and docs/console-match.png. Everything it made is removed at the end.

Run (from the repository root): .venv/bin/python bench/console_screenshots.py [--out docs]
Needs /usr/bin/chromium (apt-get install -y chromium) and the local services. Exit 1 unless both
PNG files were written (``--json``: one JSON object saying which).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from api.keys import Scope, create_key
from bench._setup import REPO, bench_environment, serve_api
from bench._verdict import Bench, Goal
from bench.recovery import listener_worker
from config.clock import utcnow
from listener.archive import EventArchive, TextLog, archive_path, shortcode_for
from models import League, Match
from models.coordination import connect_redis
from models.listener_record import MatchListenerRecord

CHROMIUM = "/usr/bin/chromium"
SHOTS = ("console-board.png", "console-match.png")
BENCH = Bench("console_screenshots", __doc__, [Goal("written", len(SHOTS), at_most=False, unit="files")])


def _matches() -> dict[str, Match]:
    """The demo's matches and their past runs (what a few days of operation leave behind)."""
    now = utcnow()
    leagues = {name: League.get_or_create(name=name)[0] for name in ("nfl", "nhl", "mlb")}

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
        "running": match("nfl", "sr:match:40001", "BUF @ KC", "inprogress", 70),
        "stopped": match("nfl", "sr:match:40002", "PHI @ DAL", "inprogress", 65),
        "stale": match("mlb", "sr:match:60001", "NYY @ BOS", "inprogress", 120, auto_dispatch_listener=False),
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


def _archive(data_dir: Path, match: Match, record_id: str) -> None:
    """An archive of pushed events and a run log, as a listener writes them."""
    path = archive_path(data_dir, match.league.name, shortcode_for(match.sr_id))
    archive = EventArchive(path).open()
    for n in range(42):
        archive.append({"payload": {"game": {"id": match.sr_id}, "event": {"sequence": n, "type": "play"}}})
    archive.close()
    log = TextLog.for_run(path, record_id)
    log.write("stream connected: %s", "push/events")
    for n in (12, 27, 42):
        log.write("%d events archived", n)
    log.write("heartbeat ok (lock extended)")


def main() -> int:
    parser = BENCH.parser()
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="Directory of the PNG files.")
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
    from playwright.sync_api import expect, sync_playwright

    tag = uuid.uuid4().hex[:8]
    tmp = Path(tempfile.mkdtemp(prefix="kickoff-shots-"))
    with bench_environment() as settings:
        env = {
            "DATABASE_URL": settings.database_url,
            "AMQP_URL": settings.amqp_url,
            "REDIS_KEY_PREFIX": f"kickoffshots:{tag}:",
            "BROKER_NAMESPACE": f"kickoffshots-{tag}",
            "DATA_DIR": str(tmp),
            "APP_ENV": "develop",
            "LISTENER_BODY": "listener.testing:ScriptedListener",
            "LISTENER_HEARTBEAT_INTERVAL_SECONDS": "2",
            "LOG_LEVEL": "WARNING",
        }
        os.environ.update(env)
        made = _matches()
        key = create_key(name="ops-console", scope=Scope.OPERATOR)[1]
        worker = listener_worker({**os.environ}, tmp / "listener-worker.log")
        server, url = serve_api(env)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM)
                page = browser.new_page(viewport={"width": 1600, "height": 560}, base_url=url)
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
                row("stopped").get_by_role("button", name="Stop").click()
                expect(row("stopped")).to_have_attribute("data-badge", "Stopped", timeout=30_000)
                _stale_run(made["stale"])
                expect(row("stale")).to_have_attribute("data-badge", "Stale", timeout=30_000)
                [running] = MatchListenerRecord.select().where(
                    MatchListenerRecord.match == made["running"].id, MatchListenerRecord.ended_at.is_null()
                )
                _archive(tmp, made["running"], str(running.id))
                page.goto("/")
                args.out.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.out / "console-board.png"), full_page=True)
                page.set_viewport_size({"width": 1100, "height": 900})
                page.goto(f"/matches/{made['running'].id}")
                page.screenshot(path=str(args.out / "console-match.png"), full_page=True)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
            worker.terminate(timeout=30)
            for url_name, pattern in (
                ("REDIS_URL", env["REDIS_KEY_PREFIX"]),
                ("BROKER_URL", env["BROKER_NAMESPACE"]),
            ):
                client = connect_redis(getattr(settings, url_name.lower()))
                keys = list(client.scan_iter(match=f"{pattern}*", count=1000))
                if keys:
                    client.delete(*keys)
    print(f"wrote {args.out / 'console-board.png'} and {args.out / 'console-match.png'}")


if __name__ == "__main__":
    sys.exit(main())

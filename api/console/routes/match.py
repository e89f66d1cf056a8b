"""The match card (/matches/{id}): runs, archive, run logs, settings and barriers; and the clone form."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from api.auth import Need, requires
from api.console.routes.history import summary
from api.console.web import OperatorSession, PageSession, act, render, session_audit, wants_json, with_notice
from api.errors import status_of
from api.headers import ctx_of
from config.assignments import split_assignment
from config.clock import utcnow
from config.errors import KickoffError
from lifecycle.clone import clone_match
from lifecycle.dispatch import request_start
from lifecycle.errors import ListenerStartSettingsError
from lifecycle.event_export import document_name, export_lines
from lifecycle.gap_timeline import gap_timeline
from lifecycle.match_admin import edit_match, match_detail, run_log_tail, under_data_dir
from lifecycle.match_ref import resolve_match, resolve_match_id
from models.event_log import card_page, card_types, event_counts, gap_markers
from models.history import history
from models.history_series import ALL
from models.listener_record import recorded_matches
from models.question import match_questions, question_counts

#: Every page and action here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])

#: Lines of a run's log the card shows.
LOG_TAIL_LINES = 40
#: Events of the log one page of the card's event list shows.
EVENTS_PER_PAGE = 50


def parse_settings(text: str, *, source: str) -> dict[str, Any]:
    """Listener settings typed one ``KEY=VALUE`` per line as the CLI reads them."""
    out: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parsed = split_assignment(line.strip())
        if parsed is None:
            raise ListenerStartSettingsError(
                f"{source}, line {number}: expected KEY=VALUE, got {line.strip()!r}"
            )
        out[parsed[0]] = parsed[1]
    return out


def settings_text(settings: dict[str, Any]) -> str:
    """The settings as the form shows them: one ``KEY=VALUE`` per line, values as JSON."""
    return "\n".join(f"{k}={json.dumps(v)}" for k, v in sorted(settings.items()))


def _game_range(detail: dict[str, Any]) -> str:
    """The shortest history range (1h, 24h, 7d) that holds the match's first run, or its start."""
    starts = [r["started_at"] for r in detail["runs"] if r.get("started_at")]
    first = min(starts) if starts else detail["scheduled"]
    first = datetime.fromisoformat(first) if isinstance(first, str) else first
    age = utcnow() - first
    return "1h" if age <= timedelta(hours=1) else "24h" if age <= timedelta(days=1) else "7d"


def _event_list(match_id: str, before: str, event_type: str) -> dict[str, Any]:
    """The card's page of the game's record: newest first, older than ``before`` (a row number),
    of one event type; a malformed ``before`` or an unknown type is said on the page, not a 500."""
    types = card_types(match_id)
    problem = None
    older_than = None
    if before.strip():
        if before.strip().isascii() and before.strip().isdigit() and len(before.strip()) < 19:
            older_than = int(before.strip())
        else:
            problem = f"'{before[:40]}' is not a row number: showing the newest events"
    wanted = event_type.strip() or None
    if wanted is not None and wanted not in types:
        problem = f"no event of type '{wanted[:40]}' in this game's record: showing every type"
        wanted = None
    rows = card_page(match_id, before=older_than, event_type=wanted, limit=EVENTS_PER_PAGE + 1)
    more = len(rows) > EVENTS_PER_PAGE
    rows = rows[:EVENTS_PER_PAGE]
    return {
        "rows": rows,
        "types": types,
        "type": wanted or "",
        "problem": problem,
        "older": rows[-1].row.seq if more and rows else None,
        "paged": older_than is not None,
    }


@router.get("/matches/{match_id}")
def match_card(
    match_id: str,
    request: Request,
    session: PageSession,
    before: str = "",
    event_type: str = Query("", alias="type"),
) -> Response:
    """The admin card of one match: its internal id, runs with exits and durations, its stream's timeline
    (runs and the gaps without a stream), the game's record (its events from the event log, newest
    first, paged and filtered by type), the questions issued and settled, log, settings."""
    ctx = ctx_of(request)
    detail = match_detail(resolve_match_id(match_id), settings=ctx.settings, coordination=ctx.coordination)
    newest = detail["runs"][0] if detail["runs"] else None
    log_path, log_lines = (None, [])
    if newest is not None:
        log_path, log_lines = run_log_tail(
            detail["id"], newest["record_id"], settings=ctx.settings, lines=LOG_TAIL_LINES
        )
    # This game's events per minute (models.history; the chart's numbers too), over the range that
    # holds its first run (or its start): 1 h, 24 h, else 7 d.
    events = history("events", range_name=_game_range(detail), key=detail["id"])
    # Paths as DATA_DIR-relative names: the card does not tell the server's layout.
    return render(
        request,
        "match.html",
        m=detail,
        newest=newest,
        log_path=log_path and under_data_dir(log_path, data_dir=ctx.settings.data_dir),
        log_lines=log_lines,
        settings_value=settings_text(detail["settings"]),
        here=f"/matches/{detail['id']}",
        events_chart=(events, summary(events)),
        record=_event_list(detail["id"], before, event_type),
        questions=match_questions(detail["id"]),
        question_counts=question_counts(detail["id"]),
        stream=gap_timeline(detail["runs"], gap_markers(detail["id"]), now=utcnow()),
        all_key=ALL,
    )


@router.get("/matches/{match_id}/archive")
def archive_download(match_id: str, request: Request, session: PageSession) -> Response:
    """The match's event log as the spec's ``{shortcode}.json`` document (streamed, as the API's archive)."""
    match = resolve_match(match_id)
    return StreamingResponse(
        export_lines(str(match.id)),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{document_name(match)}"'},
    )


@router.get("/matches/{match_id}/runs/{record_id}/log")
def run_log(match_id: str, record_id: str, request: Request, session: PageSession) -> Response:
    """The last 500 lines of one run's log, as text."""
    _path, lines = run_log_tail(
        resolve_match_id(match_id), record_id, settings=ctx_of(request).settings, lines=500
    )
    return PlainTextResponse("\n".join(lines) + "\n" if lines else "(no log for this run)\n")


@router.post("/matches/{match_id}/settings")
async def save_settings(
    match_id: str,
    request: Request,
    session: OperatorSession,
    settings: str = Form(""),
    reason: str = Form(""),
) -> Response:
    """Replace the match's listener settings, checked as `kickoff matches edit --setting` checks them."""

    def call() -> str:
        mid = resolve_match_id(match_id)
        wanted = parse_settings(settings, source="settings")
        current = match_detail(
            mid, settings=ctx_of(request).settings, coordination=ctx_of(request).coordination
        )
        unset = sorted(set(current["settings"]) - set(wanted))
        changed = edit_match(
            mid,
            set_settings=wanted or None,
            unset_settings=unset or None,
            audit=session_audit(request, session, reason.strip() or None),
        )
        if "settings" not in changed:
            return "settings unchanged"
        return "settings saved: " + (
            ", ".join(f"{k}={v}" for k, v in sorted(changed["settings"].items())) or "none"
        )

    return await act(request, call, back=f"/matches/{match_id}")


def _recorded_matches(data_dir: Any) -> list[dict[str, Any]]:
    """Matches with a listener run whose archive exists: what a clone can replay."""
    out = []
    recorded = recorded_matches(200)
    logged = event_counts([m.id for m in recorded])
    for m in recorded:
        if logged.get(str(m.id), (0, 0))[0]:
            out.append(
                {"id": m.id, "sr_id": m.sr_id, "league": m.league, "title": m.title, "scheduled": m.scheduled}
            )
    return out


@router.get("/clone")
def clone_form(request: Request, session: PageSession, source: str = "") -> Response:
    """Pick a recorded match, set listener settings (e.g. listener_force_exit_code), create the clone."""
    recorded = _recorded_matches(ctx_of(request).settings.data_dir)
    return render(request, "clone.html", recorded=recorded, source=source, here="/clone")


@router.post("/clone")
async def clone_post(
    request: Request,
    session: OperatorSession,
    sr_id: str = Form(...),
    settings: str = Form(""),
    start_now: str = Form(""),
) -> Response:
    """Create an is_test clone of ``sr_id`` (as `kickoff sim clone`), optionally start its listener now."""

    ctx = ctx_of(request)

    def call() -> tuple[str, str]:
        per_clone = parse_settings(settings, source="the clone's settings")
        clone, path, count = clone_match(
            sr_id,
            data_dir=ctx.settings.data_dir,
            settings=per_clone,
            audit=session_audit(request, session),
        )
        message = f"clone {clone.sr_id} created ({count} events, script {path.name})"
        if start_now == "1":
            _sent, note = request_start(
                str(clone.id),
                overrides=None,
                force=False,
                coordination=ctx.coordination,
                send=ctx.send_start(),
                audit=session_audit(request, session),
            )
            message += f"; {note}"
        return str(clone.id), message

    try:
        clone_id, message = await run_in_threadpool(call)
    except KickoffError as exc:
        if wants_json(request):
            return JSONResponse({"ok": False, "message": str(exc)}, status_code=status_of(exc))
        return RedirectResponse(with_notice("/clone", str(exc), ok=False), status_code=303)
    location = f"/matches/{clone_id}"
    if wants_json(request):
        return JSONResponse({"ok": True, "message": message, "match_id": clone_id, "location": location})
    return RedirectResponse(with_notice(location, message, ok=True), status_code=303)

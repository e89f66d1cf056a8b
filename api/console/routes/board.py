"""The listeners board at /: the page, its live stream (server-sent events) and the row actions."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import Response, StreamingResponse

from api.auth import Need, requires
from api.console.board_feed import BoardHub, sse
from api.console.board_view import BoardFilter, board_rows
from api.console.routes.bulk import bulk_choices
from api.console.sessions import Session
from api.console.web import (
    OperatorSession,
    PageSession,
    StreamSession,
    act,
    render,
    session_audit,
    session_token,
)
from api.headers import ctx_of
from config.text_rule import checked_reason
from lifecycle import dispatch
from lifecycle.cleanup import audit_sweep, set_auto_dispatch, stop_match_listener, sweep_stale_match_listeners
from lifecycle.dispatch import request_start
from lifecycle.match_ref import resolve_match_id

logger = logging.getLogger(__name__)

#: Every page and action here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])


def board_filter(active: str = "", league: str = "", q: str = "") -> BoardFilter:
    """The board's query: ``active=1`` (active only), ``league``, ``q`` (sr_id contains)."""
    return BoardFilter(active=active == "1", league=league.strip(), q=q.strip())


Filter = Annotated[BoardFilter, Depends(board_filter)]


@router.get("/")
def board_page(request: Request, session: PageSession, flt: Filter) -> Response:
    """The listeners board: one row per match the status board knows, with filters and actions."""
    ctx = ctx_of(request)
    flt = flt.limited_to(session.leagues)
    rows, leagues = board_rows(flt, settings=ctx.settings, coordination=ctx.coordination)
    choices = bulk_choices() if session.can_act else {}
    return render(
        request, "board.html", rows=rows, leagues=leagues, flt=flt, here=str(request.url.path), **choices
    )


@router.get("/events/board")
async def board_events(request: Request, session: StreamSession, flt: Filter) -> StreamingResponse:
    """Server-sent events: the board's rows (rendered as on the page) whenever they change.

    Every stream of one filter shares one reading per interval (``id:`` is its number); the
    session is checked on every reading (without counting as use), so a revoked key, a sign-out or
    the idle timeout ends the stream; without a live session, 401. Past
    CONSOLE_STREAMS_PER_SESSION or CONSOLE_STREAMS_PER_PROCESS the answer is 429. A session of a
    key limited to leagues gets its leagues' rows only (the filter carries the limit, so its feed is
    never shared with a wider one).
    """
    return live_stream(request, session, flt.limited_to(session.leagues))


def live_stream(request: Request, session: Session, flt: Any) -> StreamingResponse:
    """The live stream of ``flt`` (a BoardFilter or a MatchesQuery) for ``session``: see board_events."""
    hub: BoardHub = request.app.state.board_hub
    token = session_token(request) or ""
    feed, viewer = hub.join(flt, token, session)
    keepalive = max(5.0, 3 * hub.interval)

    async def stream() -> AsyncIterator[str | bytes]:
        try:
            yield "retry: 2000\n\n"
            while not await request.is_disconnected():
                frame = await feed.next_frame(viewer, timeout=keepalive)
                if frame is None:
                    yield ": waiting\n\n"
                    continue
                if token in frame.sessions:
                    live = frame.sessions[token]
                    if live is None:
                        yield sse("signed-out", "", event_id=frame.seq)
                        return
                    viewer.session = live
                if frame.problem is not None:
                    yield sse("problem", frame.problem, event_id=frame.seq)
                    continue
                version, full, delta = frame.events.get(viewer.session.can_act, (0, None, None))
                # the same bytes for every stream of the filter: the changed rows, else every row
                event = delta if delta is not None and viewer.sent_version == version - 1 else full
                if version > viewer.sent_version and event is not None:
                    viewer.sent_version = version
                    yield f"id: {frame.seq}\n".encode()
                    yield event
                else:
                    yield f"id: {frame.seq}\n: unchanged\n\n"
        finally:
            hub.leave(feed, viewer)

    events = stream()
    hub.leave_when_collected(events, feed, viewer)
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def form_reason(reason: str, *, required: bool, what: str) -> str | None:
    """The confirm step's reason (stripped); a required one missing is ReasonRequired, one breaking
    the text rule (config.text_rule) InvalidText (both 422, before anything is done)."""
    return checked_reason(reason, required=required, what=what)


@router.post("/matches/{match_id}/start")
async def start(
    match_id: str, request: Request, session: OperatorSession, force: str = Form(""), reason: str = Form("")
) -> Response:
    """Start (or force-start) the match's listener, as `kickoff listeners start [--force --reason]`."""
    ctx = ctx_of(request)
    forced = force == "1"

    def call() -> str:
        why = form_reason(reason, required=forced, what="a force start")
        mid = resolve_match_id(match_id)
        _message, note = request_start(
            mid,
            overrides=None,
            force=forced,
            coordination=ctx.coordination,
            send=ctx.send_start(),
            audit=session_audit(request, session, why),
        )
        return note

    return await act(request, call)


@router.post("/matches/{match_id}/stop")
async def stop(match_id: str, request: Request, session: OperatorSession, reason: str = Form("")) -> Response:
    """Stop the listener (exit 15 within 2 s), revoke a queued start, dispatch off; needs a reason."""
    ctx = ctx_of(request)

    def call() -> str:
        why = form_reason(reason, required=True, what="a stop")
        mid = resolve_match_id(match_id)
        result = stop_match_listener(
            mid,
            settings=ctx.settings,
            coordination=ctx.coordination,
            audit=session_audit(request, session, why),
        )
        revoked = f", revoked {result.revoked_message_id}" if result.revoked_message_id else ""
        return f"stopped: {result.rows_closed} rows closed with 15{revoked}; auto-dispatch off"

    return await act(request, call)


@router.post("/matches/{match_id}/auto-dispatch")
async def auto_dispatch(
    match_id: str, request: Request, session: OperatorSession, on: str = Form(...), reason: str = Form("")
) -> Response:
    """Dispatch on / Dispatch off (an optional reason), as `kickoff matches set-dispatch MATCH_ID on|off`."""
    ctx = ctx_of(request)
    wanted = on == "1"

    def call() -> str:
        why = form_reason(reason, required=False, what="dispatch on/off")
        mid = resolve_match_id(match_id)
        set_auto_dispatch(
            mid,
            wanted,
            coordination=ctx.coordination,
            audit=session_audit(request, session, why),
        )
        return f"auto-dispatch {'on' if wanted else 'off'}"

    return await act(request, call)


@router.post("/board/dispatch")
async def dispatch_now(request: Request, session: OperatorSession) -> Response:
    """Dispatch now: one dispatch of matches due now, as `kickoff listeners dispatch`."""
    ctx = ctx_of(request)

    def call() -> str:
        dispatch.audit_dispatch(
            session_audit(request, session), within_minutes=dispatch.MANUAL_WITHIN_MINUTES
        )
        r = dispatch.dispatch_upcoming_match_listeners(
            within_minutes=dispatch.MANUAL_WITHIN_MINUTES,
            settings=ctx.settings,
            coordination=ctx.coordination,
            send=ctx.send_start(),
        )
        return r.summary()

    return await act(request, call)


@router.post("/board/sweep")
async def sweep_now(request: Request, session: OperatorSession) -> Response:
    """Sweep now: close dead listeners' rows as Abandoned (14), as `kickoff listeners sweep`."""
    ctx = ctx_of(request)

    def call() -> str:
        audit_sweep(session_audit(request, session))
        r = sweep_stale_match_listeners(
            settings=ctx.settings, coordination=ctx.coordination, send_backfill=ctx.send_backfill()
        )
        if r.locked:
            return "sweep skipped: another sweep is running"
        return f"sweep: {r.abandoned} rows abandoned (14) on {len(r.matches)} matches"

    return await act(request, call)

"""Listener operations: the board, one match, start/stop/auto-dispatch, dispatch, sweep and bulk actions."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from api.auth import LeagueFrom, Need, limited_key, reads_league, requires
from api.errors import RateLimited, error_responses, public_message
from api.headers import actor_of, audit_of, ctx_of, request_id_of
from api.openapi import also_200
from api.schemas import (
    ArchiveVerificationAnswer,
    AutoDispatchBody,
    BulkBody,
    BulkOutcomeAnswer,
    BulkPreviewAnswer,
    DispatchBody,
    ListenerBoardAnswer,
    PathId,
    QueryId,
    StartListenerBody,
    StopListenerBody,
    SweepBody,
)
from config.clock import utcnow
from lifecycle.archive_verify import verify_match_archive
from lifecycle.board import listener_board
from lifecycle.bulk import bulk_filter, preview_bulk, run_bulk
from lifecycle.cleanup import audit_sweep, set_auto_dispatch, stop_match_listener, sweep_stale_match_listeners
from lifecycle.dispatch import audit_dispatch, dispatch_upcoming_match_listeners, request_start
from lifecycle.event_export import document_name, export_lines
from lifecycle.listener_run import validate_listener_settings
from lifecycle.match_ref import match_not_found, resolve_match, resolve_match_id
from models.verification import ARCHIVE_VERIFY_INTERVAL_SECONDS, claim_archive_verification

router = APIRouter(tags=["listeners"])


@router.get("/v1/listeners", dependencies=[requires(Need.READ)], responses=error_responses(404))
def board(request: Request, match_id: QueryId = None, active: bool = False) -> ListenerBoardAnswer:
    """The listener board (as `kickoff listeners status --json`)."""
    ctx = ctx_of(request)
    entries = listener_board(
        settings=ctx.settings,
        coordination=ctx.coordination,
        match_id=None if match_id is None else resolve_match_id(match_id),
        active_only=active,
    )
    entries = [e for e in entries if reads_league(request, e.league)]  # a limited key: its leagues only
    if match_id is not None and not entries and limited_key(request) is not None:
        raise match_not_found(match_id)
    return ListenerBoardAnswer(at=utcnow().isoformat(timespec="seconds"), count=len(entries), matches=entries)


@router.get("/v1/matches/{match_id}", dependencies=[requires(Need.READ)])
def show_match(match_id: PathId, request: Request) -> dict[str, Any]:
    """One match with its listener board entry (404 if unknown, or of a league the key is not limited to)."""
    ctx = ctx_of(request)
    match = resolve_match(match_id)
    if not reads_league(request, match.league.name):
        raise match_not_found(match_id)
    entries = listener_board(settings=ctx.settings, coordination=ctx.coordination, match_id=str(match.id))
    return {
        "id": str(match.id),
        "sr_id": match.sr_id,
        "title": match.title,
        "league": match.league.name,
        "scheduled": match.scheduled.isoformat(),
        "status": match.status,
        "is_test": match.is_test,
        "auto_dispatch": match.auto_dispatch_listener,
        "listener": entries[0].as_dict() if entries else None,
    }


@router.post(
    "/v1/matches/{match_id}/archive/verify",
    dependencies=[requires(Need.OPERATOR, league=LeagueFrom.MATCH)],
    responses=error_responses(429, 502),
)
def verify_archive(match_id: PathId, request: Request) -> ArchiveVerificationAnswer:
    """Compare the match's listener archive with the provider's play-by-play and store the outcome (as
    `kickoff matches verify-archive --json`): an operator act, audited, once a minute per match
    (429 sooner); 502/503 name SPORTRADAR_BASE_URL when the play-by-play cannot be had."""
    match = resolve_match(match_id)
    if not claim_archive_verification(match.id, interval_seconds=ARCHIVE_VERIFY_INTERVAL_SECONDS):
        raise RateLimited(
            f"match {match.id}: its archive was verified less than {ARCHIVE_VERIFY_INTERVAL_SECONDS} s ago"
        )
    result = verify_match_archive(str(match.id), settings=ctx_of(request).settings, audit=audit_of(request))
    return ArchiveVerificationAnswer(**result.as_dict())


@router.get(
    "/v1/matches/{match_id}/archive",
    dependencies=[requires(Need.READ)],
    response_class=StreamingResponse,
    responses={200: {"content": {"application/json": {}}, "description": "The {shortcode}.json document."}},
)
def archive(match_id: PathId, request: Request) -> StreamingResponse:
    """The match's event log as the spec's ``{shortcode}.json`` document (as `kickoff matches export`):
    a JSON array, one message per line, every distinct message once, in arrival order; streamed a page
    of the log at a time (404 if unknown, or of a league the key is not limited to)."""
    match = resolve_match(match_id)
    if not reads_league(request, match.league.name):  # a read: authorize checks leagues of acts only
        raise match_not_found(match_id)
    return StreamingResponse(
        export_lines(str(match.id)),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{document_name(match)}"'},
    )


@router.post(
    "/v1/matches/{match_id}/start-listener",
    dependencies=[requires(Need.OPERATOR, league=LeagueFrom.MATCH)],
    status_code=202,
    responses={
        **also_200("A start is already pending or running: nothing enqueued."),
        **error_responses(409),
    },
)
def start_listener(match_id: PathId, request: Request, body: StartListenerBody | None = None) -> JSONResponse:
    """Enqueue a start (as `kickoff listeners start`); 200 with enqueued false when one is pending."""
    ctx = ctx_of(request)
    body = body or StartListenerBody()
    overrides = body.override_values()
    validate_listener_settings(overrides, source="overrides")
    mid = resolve_match_id(match_id)
    message, note = request_start(
        mid,
        overrides=overrides or None,
        force=body.force,
        coordination=ctx.coordination,
        send=ctx.send_start(),
        audit=audit_of(request, body.reason),
    )
    data = {
        "match_id": mid,
        "enqueued": message is not None,
        "message_id": message.message_id if message else None,
        "force": body.force,
        "detail": note,
    }
    return JSONResponse(data, status_code=202 if message is not None else 200)


@router.post(
    "/v1/matches/{match_id}/stop-listener", dependencies=[requires(Need.OPERATOR, league=LeagueFrom.MATCH)]
)
def stop_listener(match_id: PathId, body: StopListenerBody, request: Request) -> dict[str, Any]:
    """Stop the listener (exit 15), revoke a queued start, turn auto-dispatch off; ``reason`` is required."""
    ctx = ctx_of(request)
    mid = resolve_match_id(match_id)
    return stop_match_listener(
        mid,
        settings=ctx.settings,
        coordination=ctx.coordination,
        audit=audit_of(request, body.reason),
    ).as_dict()


@router.post(
    "/v1/matches/{match_id}/auto-dispatch", dependencies=[requires(Need.OPERATOR, league=LeagueFrom.MATCH)]
)
def auto_dispatch(match_id: PathId, body: AutoDispatchBody, request: Request) -> dict[str, Any]:
    """Turn auto-dispatch on or off (on also clears a leftover stop flag)."""
    mid = resolve_match_id(match_id)
    before = set_auto_dispatch(
        mid,
        body.on,
        coordination=ctx_of(request).coordination,
        audit=audit_of(request, body.reason),
    )
    return {"match_id": mid, "auto_dispatch": body.on, "was": before}


@router.post("/v1/listeners/dispatch", dependencies=[requires(Need.OPERATOR)])
def dispatch(request: Request, body: DispatchBody | None = None) -> dict[str, Any]:
    """Run one dispatch now (as `kickoff listeners dispatch`; within_minutes defaults to 0)."""
    ctx = ctx_of(request)
    body = body or DispatchBody()
    audit_dispatch(audit_of(request, body.reason), within_minutes=body.within_minutes, is_test=body.is_test)
    started = time.perf_counter()
    result = dispatch_upcoming_match_listeners(
        within_minutes=body.within_minutes,
        is_test=body.is_test,
        settings=ctx.settings,
        coordination=ctx.coordination,
        send=ctx.send_start(),
    )
    request.app.state.metrics.dispatch_tick.observe(time.perf_counter() - started)
    return result.as_dict()


@router.post("/v1/listeners/sweep", dependencies=[requires(Need.OPERATOR)])
def sweep(request: Request, body: SweepBody | None = None) -> dict[str, Any]:
    """Close dead listeners' rows as Abandoned (14) and clear their barriers."""
    ctx = ctx_of(request)
    body = body or SweepBody()
    audit_sweep(audit_of(request, body.reason), heartbeat_stale_seconds=body.heartbeat_stale_seconds)
    result = sweep_stale_match_listeners(
        heartbeat_stale_seconds=body.heartbeat_stale_seconds,
        settings=ctx.settings,
        coordination=ctx.coordination,
        send_backfill=ctx.send_backfill(),
    )
    return result.as_dict()


@router.post(
    "/v1/listeners/bulk", dependencies=[requires(Need.OPERATOR)], responses=error_responses(404, 409)
)
def bulk(body: BulkBody, request: Request) -> BulkPreviewAnswer | BulkOutcomeAnswer:
    """A bulk action on the matches of a filter, in two calls (as `kickoff listeners bulk`).

    With ``dry_run`` true: the matches it would touch and a ``confirm`` (valid 300 s); nothing is
    changed. The same call with that ``confirm`` instead acts on exactly the previewed matches (one
    that joined the filter since is not touched) and answers one result per match; each act and
    the bulk act are audited with the reason. A confirm that is unknown, expired, already used or
    was issued for another action, filter or key is 409 (preview again); an unknown league or
    match id is 404; more than 500 matches is 409.
    """
    ctx = ctx_of(request)
    flt = bulk_filter(
        league=body.filter.league,
        status=body.filter.status,
        badge=body.filter.badge,
        match_ids=body.filter.match_ids or (),
    )
    if body.dry_run:
        preview = preview_bulk(
            body.action,
            flt,
            settings=ctx.settings,
            coordination=ctx.coordination,
            actor=actor_of(request),
            reason=body.reason,
        )
        return BulkPreviewAnswer(**preview.as_dict())
    assert body.confirm is not None  # the body's rule: no dry run without a confirm
    outcome = run_bulk(
        body.action,
        flt,
        body.confirm,
        settings=ctx.settings,
        coordination=ctx.coordination,
        send=ctx.send_start() if body.action in ("start", "force-start") else None,
        actor=actor_of(request),
        reason=body.reason,
        request_id=request_id_of(request),
        describe=public_message,
    )
    return BulkOutcomeAnswer(**outcome.as_dict())

"""The board's bulk action: pick a filter and a reason, see the preview, confirm, see each match's result."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from api.auth import Need, requires
from api.console.web import OperatorSession, render
from api.errors import public_message, status_of
from api.headers import ctx_of, request_id_of
from config.errors import KickoffError
from config.text_rule import checked_reason
from lifecycle.bulk import (
    ACTIONS,
    BADGES,
    CONFIRM_SECONDS,
    MAX_BULK_MATCHES,
    STATUSES,
    BulkFilter,
    bulk_filter,
    preview_bulk,
    run_bulk,
)
from lifecycle.leagues import league_names

logger = logging.getLogger(__name__)

#: Every page and action here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])

#: The choices of the board's bulk form.
CHOICES = {"bulk_actions": ACTIONS, "bulk_statuses": STATUSES, "bulk_badges": BADGES}
#: The confirm step's "expires in" (minutes).
CONFIRM_MINUTES = CONFIRM_SECONDS // 60


def bulk_choices() -> dict[str, object]:
    """The bulk form's choices, every league included (the board page renders them)."""
    return {**CHOICES, "bulk_leagues": league_names()}


async def _fields(request: Request) -> tuple[str, BulkFilter, str, str]:
    form = await request.form()
    text = {name: str(form.get(name, "") or "") for name in ("action", "league", "status", "badge", "reason")}
    # rows ticked on the Matches board (at most a bulk action's worth; the library checks each id)
    ids = [str(v) for v in form.getlist("match_ids")][: MAX_BULK_MATCHES + 1]
    flt = bulk_filter(league=text["league"], status=text["status"], badge=text["badge"], match_ids=ids)
    return text["action"], flt, text["reason"].strip(), str(form.get("confirm", "") or "")


def _refused(request: Request, exc: KickoffError, **context: object) -> Response:
    status = status_of(exc)
    logger.info("console bulk %s refused (%s): %s", request.url.path, status, exc)
    return render(request, "bulk.html", status_code=status, error=public_message(exc), **context)


#: One step of the bulk form: (action, filter, reason, confirm) -> what the page shows.
Step = Callable[[str, BulkFilter, str, str], object]


async def _step(request: Request, step: Step, shown_as: str, **page: object) -> Response:
    """Run ``step`` on the posted form (off the event loop); the page shows its result as ``shown_as``,
    or the refusal with its status."""
    action, flt, reason, confirm = await _fields(request)
    context = {"action": action, "flt": flt, "reason": reason}
    try:
        checked_reason(reason, required=False)  # the one text rule, before any step acts
        result = await run_in_threadpool(step, action, flt, reason, confirm)
    except KickoffError as exc:
        return _refused(request, exc, **context)
    return render(request, "bulk.html", **{shown_as: result}, **page, **context)


@router.post("/board/bulk")
async def bulk_preview(request: Request, session: OperatorSession) -> Response:
    """The preview of a bulk action (as `kickoff listeners bulk ... --dry-run`): nothing is changed."""
    ctx = ctx_of(request)

    def preview(action: str, flt: BulkFilter, reason: str, _confirm: str) -> object:
        return preview_bulk(
            action,
            flt,
            settings=ctx.settings,
            coordination=ctx.coordination,
            actor=session.actor,
            reason=reason,
        )

    return await _step(request, preview, "preview", confirm_minutes=CONFIRM_MINUTES)


@router.post("/board/bulk/confirm")
async def bulk_confirm(request: Request, session: OperatorSession) -> Response:
    """Act on exactly the previewed matches (as `kickoff listeners bulk ... --yes`); each result shown."""
    ctx = ctx_of(request)

    def confirm_bulk(action: str, flt: BulkFilter, reason: str, confirm: str) -> object:
        return run_bulk(
            action,
            flt,
            confirm,
            settings=ctx.settings,
            coordination=ctx.coordination,
            send=ctx.send_start() if action in ("start", "force-start") else None,
            actor=session.actor,
            reason=reason,
            request_id=request_id_of(request),
            describe=public_message,
        )

    return await _step(request, confirm_bulk, "outcome")

"""The Trades page: trade claims waiting for an operator, and the three ways to reconcile one."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.auth import Need, requires
from api.console.web import OperatorSession, PageSession, act, render, session_audit
from api.headers import ctx_of
from publisher.errors import TriggerValidationError
from publisher.trade_reconcile import STALE_CLAIM_SECONDS, Resolution, claims_to_reconcile, reconcile_claim

#: Every page and action here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])

#: What each button says it will do (the confirm step asks it as a question).
CHOICES = (
    (Resolution.PUBLISHED, "Mark published", "Mark {key} published? The worker got it; nothing is sent."),
    (
        Resolution.REPUBLISH,
        "Republish",
        "Republish {key} with message id {message_id}? The worker drops a duplicate by that id.",
    ),
    (Resolution.CANCEL, "Cancel", "Cancel {key}? It is never sent; its key stays claimed."),
)


@router.get("/trades")
def trades_page(request: Request, session: PageSession) -> Response:
    """Uncertain, set-aside and stuck claims, oldest first (as `kickoff trades reconcile`)."""
    return render(
        request,
        "trades.html",
        claims=claims_to_reconcile(limit=200),
        choices=CHOICES,
        stale_seconds=STALE_CLAIM_SECONDS,
        here="/trades",
    )


@router.post("/trades/reconcile")
async def trades_reconcile(request: Request, session: OperatorSession) -> Response:
    """Resolve one claim (as `kickoff trades reconcile QUEUE KEY --as CHOICE`): form fields queue,
    claim_key, resolution and league_id (the claim's league: a key is claimed once per league)."""
    form = await request.form()
    queue, key, choice, league = (
        str(form.get(name, "")) for name in ("queue", "claim_key", "resolution", "league_id")
    )
    ctx = ctx_of(request)

    def call() -> str:
        try:
            resolution = Resolution(choice)
        except ValueError as exc:
            raise TriggerValidationError(
                "resolution", f"must be one of {[r.value for r in Resolution]}"
            ) from exc
        entry = reconcile_claim(
            queue=queue,
            claim_key=key,
            resolution=resolution,
            operator=f"console {session.key_name}",
            publisher=ctx.publisher() if resolution is Resolution.REPUBLISH else None,
            audit=session_audit(request, session),
            league_id=league or None,
        )
        done = f"{entry.status} ({entry.resolution}, message id {entry.message_id})"
        return f"{entry.queue} {entry.claim_key}: {done}"

    return await act(request, call, back="/trades")

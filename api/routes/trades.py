"""/v1/trade/*: the direct trade publishers (claim in execution_log, then publish) and reconciliation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from api.auth import LeagueFrom, Need, limited_key, reads_league, requires
from api.errors import error_responses
from api.headers import audit_of, ctx_of, key_id_of, traceparent
from api.openapi import also_200
from api.schemas import (
    CounterBody,
    DecisionBody,
    DecisionRetryBody,
    OfferApproveBody,
    PathId,
    ReconcileBody,
)
from config.public_text import public_text
from publisher import trades
from publisher.trade_reconcile import Resolution, claims_to_reconcile, reconcile_claim
from publisher.trades import TradeResult, TradeStatus

router = APIRouter(prefix="/v1/trade", tags=["trades"])

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])

DUPLICATE_ANSWER = "The key is already claimed: the claim as it stands (duplicate), nothing sent."

# A new claim is accepted: published (confirmed), pending (saved, the broker did not answer: the
# drain republishes it until confirmed) and uncertain (sent, unconfirmed: it waits for an operator,
# /v1/trade/reconcile). A repeat of a claimed key is 200 duplicate. failed: the broker refused the
# message (502); repeating the request answers duplicate, a failed decision is sent again through
# .../decision/retry.
STATUS_CODES = {
    TradeStatus.PUBLISHED: 202,
    TradeStatus.PENDING: 202,
    TradeStatus.UNCERTAIN: 202,
    TradeStatus.DUPLICATE: 200,
    TradeStatus.FAILED: 502,
}


def _claim_route(path: str, *, league: LeagueFrom = LeagueFrom.BODY) -> Callable[[Endpoint], Endpoint]:
    """``POST path``, a route that claims a key and publishes: trigger keys of the league (named by
    ``league``), answered by ``answer`` (202 new, 200 duplicate, 409, 502)."""
    return router.post(
        path,
        dependencies=[requires(Need.TRIGGER, league=league)],
        status_code=202,
        responses={**also_200(DUPLICATE_ANSWER), **error_responses(409, 502)},
    )


def answer(result: TradeResult) -> JSONResponse:
    """The trade answer with its status code (see STATUS_CODES); its error as a caller reads it."""
    body = result.as_json()
    body["error"] = public_text(body.get("error"))
    return JSONResponse(body, status_code=STATUS_CODES[result.status])


def public_claim(claim: dict[str, Any]) -> dict[str, Any]:
    """A claim's JSON with its stored error as a caller reads it (config.public_text)."""
    return {**claim, "error": public_text(claim.get("error"))}


def _claim_context(request: Request, body_traceparent: str | None) -> dict[str, Any]:
    """What every new trade claim takes from its request: the publisher, the trace, the key, the audit."""
    return {
        "publisher": ctx_of(request).publisher(),
        "traceparent": traceparent(request, body_traceparent),
        "created_by_key_id": key_id_of(request),
        "audit": audit_of(request),
    }


@_claim_route("/offers/{offer_key}/approve")
def approve_offer(offer_key: PathId, body: OfferApproveBody, request: Request) -> JSONResponse:
    """Approve an offer: claim ``offer_key``, publish to trade_submissions (ESPN ids)."""
    result = trades.submit_offer(
        offer_key=offer_key,
        league_id=body.league_id,
        team=body.team_id,
        counterparty_team=body.counterparty_team_id,
        give_player_ids=body.give_player_ids,
        receive_player_ids=body.receive_player_ids,
        **_claim_context(request, body.traceparent),
    )
    return answer(result)


@_claim_route("/incoming/{trade_id}/decision")
def decide(trade_id: PathId, body: DecisionBody, request: Request) -> JSONResponse:
    """Accept or reject an incoming trade: claim the decision key (default: the trade id)."""
    result = trades.respond_to_trade(
        decision_key=body.decision_key or trade_id,
        league_id=body.league_id,
        team=body.team_id,
        trade_id=trade_id,
        decision=body.decision,
        **_claim_context(request, body.traceparent),
    )
    return answer(result)


@_claim_route("/incoming/{trade_id}/decision/retry", league=LeagueFrom.DECISION)
def retry_decision(trade_id: PathId, request: Request, body: DecisionRetryBody | None = None) -> JSONResponse:
    """Publish a failed or pending decision again with its message id (409 otherwise). The decision is
    the key's in the body's ``league_id``, else its only one (a key limited to leagues: among its
    leagues; another league's is 404, as if absent). Audited trade.retry, as `kickoff trades retry`."""
    key = (body.decision_key if body else None) or trade_id
    league_id = body.league_id if body else None
    limited = limited_key(request)
    result = trades.retry_decision(
        decision_key=key,
        publisher=ctx_of(request).publisher(),
        league_id=league_id,
        leagues=limited.leagues if limited is not None else None,
        audit=audit_of(request),
    )
    return answer(result)


@_claim_route("/incoming/{trade_id}/counter")
def counter(trade_id: PathId, body: CounterBody, request: Request) -> JSONResponse:
    """Stage a counter-offer on trade_negotiations (Sleeper ids), claimed by ``publication_key``."""
    result = trades.stage_counter(
        publication_key=body.publication_key,
        league_id=body.league_id,
        team=body.team_id,
        trade_id=trade_id,
        give_player_ids=body.give_player_ids,
        receive_player_ids=body.receive_player_ids,
        **_claim_context(request, body.traceparent),
    )
    return answer(result)


@router.get("/reconcile", dependencies=[requires(Need.READ)])
def claims_waiting(request: Request, limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
    """Claims waiting for an operator, oldest first: uncertain, set aside, stuck in claimed
    (as `kickoff trades reconcile --json`); a key limited to leagues sees its leagues' only."""
    claims = [public_claim(c.as_json()) for c in claims_to_reconcile(limit=limit)]
    claims = [c for c in claims if reads_league(request, c.get("league_id"))]
    return {"count": len(claims), "claims": claims}


@router.post("/reconcile", dependencies=[requires(Need.OPERATOR)], responses=error_responses(404, 409, 502))
def reconcile(body: ReconcileBody, request: Request) -> dict[str, Any]:
    """Resolve one waiting claim: published, republish (same message id) or cancel; the claim as it now
    stands (as `kickoff trades reconcile QUEUE KEY --as CHOICE --json`)."""
    resolution = Resolution(body.resolution)
    entry = reconcile_claim(
        queue=body.queue,
        claim_key=body.claim_key,
        resolution=resolution,
        operator=f"api key {request.state.api_key_id}",
        publisher=ctx_of(request).publisher() if resolution is Resolution.REPUBLISH else None,
        audit=audit_of(request, body.reason),
        league_id=body.league_id,
    )
    return public_claim(entry.as_json())

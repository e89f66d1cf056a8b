"""POST /v1/trigger/*: lineup, waiver, draft-pick and rumor-action through the library triggers."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.errors import error_responses
from api.headers import ctx_of, key_id_of, run_id, traceparent
from api.openapi import also_200
from api.schemas import DraftPickBody, LineupBody, RumorBody, TriggerBody, WaiverBody
from publisher.rumor import RumorRequest, evaluate_rumors, signals_from_json
from publisher.triggers import (
    DraftPickRequest,
    LineupRequest,
    TriggerResult,
    WaiverRequest,
    trigger_draft_pick,
    trigger_lineup,
    trigger_waiver,
)

router = APIRouter(prefix="/v1/trigger", tags=["triggers"])

DUPLICATE = "duplicate"
DUPLICATE_ANSWER = (
    "A duplicate of a pending or recent action (its key): the original tracking id, nothing sent."
)


def answer(result: TriggerResult) -> JSONResponse:
    """202 for a new action (queued or pending), 200 for a duplicate with the original tracking id."""
    body = result.as_json()
    return JSONResponse(body, status_code=200 if body["status"] == DUPLICATE else 202)


def _send(request: Request, body: TriggerBody, request_cls: Any, send: Any, **fields: Any) -> JSONResponse:
    """Build ``request_cls`` from the body (its fields by name, ``team_id`` as ``team``, the request's
    traceparent header unless the body names one; ``fields`` override) and send it with ``send``."""
    values = body.library_fields()
    values.pop("team_id")
    values.update(
        team=body.team_id,
        traceparent=traceparent(request, body.traceparent),
        created_by_key_id=key_id_of(request),
        **fields,
    )
    ctx = ctx_of(request)
    trigger_request = request_cls(**values)
    return answer(
        send(
            trigger_request,
            publisher=ctx.publisher(),
            settings=ctx.settings,
            run_id=run_id(request),
            committer=ctx.committer,
        )
    )


def _swaps(body: LineupBody) -> list[dict[str, Any]]:
    return [s.model_dump(exclude_none=True) for s in body.swaps]


@router.post("/lineup", status_code=202, responses={**also_200(DUPLICATE_ANSWER), **error_responses(409)})
def lineup(body: LineupBody, request: Request) -> JSONResponse:
    """Queue a lineup change (lineup_updates)."""
    return _send(request, body, LineupRequest, trigger_lineup, swaps=_swaps(body))


@router.post(
    "/waiver", status_code=202, responses={**also_200(DUPLICATE_ANSWER), **error_responses(404, 409)}
)
def waiver(body: WaiverBody, request: Request) -> JSONResponse:
    """Queue a waiver claim (waiver_actions), optionally chained behind an IR move."""
    return _send(request, body, WaiverRequest, trigger_waiver)


@router.post("/draft-pick", status_code=202, responses={**also_200(DUPLICATE_ANSWER), **error_responses(409)})
def draft_pick(body: DraftPickBody, request: Request) -> JSONResponse:
    """Queue a draft target (draft_targets); 409 for a filled or expired pick or a dead target, 503 if
    not delivered (retry with the same key)."""
    return _send(request, body, DraftPickRequest, trigger_draft_pick)


def _roster_id(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        return value  # the library refuses it, naming the field


@router.post(
    "/rumor-action", status_code=202, responses={**also_200(DUPLICATE_ANSWER), **error_responses(409)}
)
def rumor_action(body: RumorBody, request: Request) -> JSONResponse:
    """Weigh rumor signals; one outcome per signal (the lineup and waiver triggers it sent)."""
    ctx = ctx_of(request)
    rumor = RumorRequest(
        league_id=body.league_id,
        team=body.team_id,
        season=body.season,
        week=body.week,
        roster={_roster_id(k): v for k, v in body.roster.items()},
        signals=signals_from_json([s.model_dump() for s in body.signals]),
        traceparent=traceparent(request, body.traceparent),
        created_by_key_id=key_id_of(request),
    )
    outcomes = evaluate_rumors(
        rumor, publisher=ctx.publisher(), settings=ctx.settings, run_id=run_id(request)
    )
    data = [o.as_json() for o in outcomes]
    sent_new = any(r["status"] != DUPLICATE for o in data for r in o["results"])
    return JSONResponse({"outcomes": data}, status_code=202 if sent_new else 200)

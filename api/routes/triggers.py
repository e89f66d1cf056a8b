"""POST /v1/trigger/*: one route per declared trigger queue (publisher.trigger_queues), and rumor-action.

``build_router`` generates each trigger queue's route from its declaration: its path, its body
(the queue's request model), its scope (declared on the route, ``api.auth.requires``), its
statuses and its description; the route sends the body with the queue's trigger function.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.auth import LeagueFrom, Need, requires
from api.errors import error_responses
from api.headers import audit_of, ctx_of, key_id_of, run_id, traceparent
from api.openapi import also_200
from api.schemas import RumorBody
from config import spans
from players.rumors import RumorRequest, evaluate_rumors, signals_from_json
from publisher.trigger_queues import ROUTE_PREFIX, TriggerQueue, trigger_queues
from publisher.trigger_requests import TriggerRequest
from publisher.triggers import TriggerResult, send

DUPLICATE = "duplicate"
DUPLICATE_ANSWER = (
    "A duplicate of a pending or recent action (its key): the original tracking id, nothing sent."
)


def answer(result: TriggerResult) -> JSONResponse:
    """202 for a new action (queued or pending), 200 for a duplicate with the original tracking id."""
    body = result.as_json()
    return JSONResponse(body, status_code=200 if body["status"] == DUPLICATE else 202)


def _endpoint(queue: TriggerQueue) -> Callable[..., JSONResponse]:
    """The route of ``queue``: its body (the queue's request model) sent with the request's
    traceparent header unless the body names one, the caller's key and run id."""

    def endpoint(body: TriggerRequest, request: Request) -> JSONResponse:
        ctx = ctx_of(request)
        trigger_request = body.model_copy(update={"traceparent": traceparent(request, body.traceparent)})
        return answer(
            send(
                queue,
                trigger_request,
                publisher=ctx.publisher(),
                settings=ctx.settings,
                run_id=run_id(request),
                committer=ctx.committer,
                created_by_key_id=key_id_of(request),
                in_span=spans.current_span(),  # the request's span is the trigger's (one span fewer)
                audit=audit_of(request),  # trigger.send, before the send
            )
        )

    endpoint.__name__ = queue.operation_name
    endpoint.__doc__ = queue.description
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=queue.request),
            inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
        ],
        return_annotation=JSONResponse,
    )
    return endpoint


def build_router() -> APIRouter:
    """The trigger routes: one per trigger queue declared now, then rumor-action."""
    router = APIRouter(prefix=ROUTE_PREFIX, tags=["triggers"])
    for queue in trigger_queues():
        router.add_api_route(
            queue.route,
            _endpoint(queue),
            methods=["POST"],
            status_code=202,
            name=queue.operation_name,
            description=queue.description,
            responses={**also_200(DUPLICATE_ANSWER), **error_responses(*queue.error_statuses)},
            dependencies=[requires(Need(queue.scope), league=LeagueFrom.BODY)],
        )
    router.add_api_route(
        "/rumor-action",
        rumor_action,
        methods=["POST"],
        status_code=202,
        responses={**also_200(DUPLICATE_ANSWER), **error_responses(409)},
        dependencies=[requires(Need.TRIGGER, league=LeagueFrom.BODY)],
    )
    return router


def _roster_id(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        return value  # the library refuses it, naming the field


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
        rumor,
        publisher=ctx.publisher(),
        settings=ctx.settings,
        run_id=run_id(request),
        audit=audit_of(request),
    )
    data = [o.as_json() for o in outcomes]
    sent_new = any(r["status"] != DUPLICATE for o in data for r in o["results"])
    return JSONResponse({"outcomes": data}, status_code=202 if sent_new else 200)

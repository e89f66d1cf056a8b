"""GET /healthz (the process answers), GET /readyz (its services answer), GET /metrics."""

from __future__ import annotations

import logging
from contextlib import nullcontext

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.auth import Need, requires
from api.context import ApiContext
from api.headers import ctx_of
from api.probes import Services, ask_all

logger = logging.getLogger(__name__)

router = APIRouter(tags=["health"])


def _services(ctx: ApiContext) -> Services:
    """The API's handles for the probes: the database bound at boot, the coordination store and the AMQP
    connection the probes keep (``ctx.readiness``: reopened when the broker dropped it)."""
    return Services(
        settings=ctx.settings,
        bind_database=lambda: None,
        coordination=lambda: ctx.coordination,
        amqp=lambda: nullcontext(ctx.readiness.publisher()),  # kept between probes, not closed
    )


@router.get("/healthz", dependencies=[requires(Need.PUBLIC)])
async def healthz() -> dict[str, str]:
    """The process is up (no service is asked)."""
    return {"status": "ok"}


#: The body of /readyz, ready (200) or not (503).
READINESS = {"type": "object", "properties": {"status": {"enum": ["ready", "unavailable"]}}}


@router.get(
    "/readyz",
    dependencies=[requires(Need.PUBLIC)],
    responses={
        200: {"description": "All answer.", "content": {"application/json": {"schema": READINESS}}},
        503: {"description": "A service fails.", "content": {"application/json": {"schema": READINESS}}},
    },
)
def readyz(request: Request) -> JSONResponse:
    """PostgreSQL, Redis, the Dramatiq broker and RabbitMQ answer; 503 names any that does not.

    Each service is ``ok`` or ``failing``: why (and where) is in the server's log, not the answer.
    An answer is kept 2 s: callers in that window share one round of probes.
    """
    body, status = _readiness(request)
    return JSONResponse(body, status_code=status)


def _readiness(request: Request) -> tuple[dict[str, object], int]:
    """The kept /readyz answer, else a new round of probes; recorded in kickoff_readiness_service_ok."""
    ctx, metrics = ctx_of(request), request.app.state.metrics
    body, status = ctx.readiness.answer(lambda: _probe(ctx), on_probe=metrics.readiness_probes.inc)
    metrics.observe_readiness(body["services"])
    return body, status


def _probe(ctx: ApiContext) -> tuple[dict[str, object], int]:
    services: dict[str, str] = {}
    for answer in ask_all(_services(ctx)):
        services[answer.probe.name] = "ok" if answer.ok else "failing"
        if not answer.ok:
            logger.warning("readyz: %s is failing: %s", answer.probe.name, answer.detail)
    failing = [name for name, state in services.items() if state != "ok"]
    body = {"status": "unavailable" if failing else "ready", "failing": failing, "services": services}
    return body, 503 if failing else 200


@router.get(
    "/metrics",
    dependencies=[requires(Need.METRICS)],
    response_class=Response,
    responses={200: {"description": "Prometheus text exposition.", "content": {CONTENT_TYPE_LATEST: {}}}},
)
def metrics(request: Request) -> Response:
    """Prometheus text: this process's request latency and readiness plus the deployment's state read now."""
    _readiness(request)
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)

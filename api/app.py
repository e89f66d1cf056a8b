"""The ASGI application: routes, the auth dependency, the error mapping and the request layer."""

from __future__ import annotations

import gc
import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.auth import KeyCache, authorize
from api.console.app import install_console
from api.context import ApiContext
from api.docs import install_docs
from api.edges import ANSWER_HEADER_DICT, EdgeGuard, allowed_hosts
from api.errors import error_body, status_of
from api.metrics import ApiMetrics
from api.middleware import RequestLayer
from api.openapi import allowed_methods, install_openapi
from api.routes import actions, apikeys, audit, contract, health, history, listeners, runs, trades, triggers
from config.errors import KickoffError
from config.feed_text import unstorable_text
from config.settings import KickoffSettings, load_settings
from config.tracing import configure_tracing

logger = logging.getLogger(__name__)

DESCRIPTION = """kickoff's HTTP API: triggers and trades through the transactional outbox, job runs,
listener operations, health and Prometheus metrics. Authenticate with `Authorization: Bearer KEY`
(`kickoff apikeys create`)."""


def _request_id(request: Request) -> str | None:
    return request.scope.get("state", {}).get("request_id")


def _field_of(loc: tuple[Any, ...]) -> str:
    """The field as the library names it: ``swaps[0].player_id``."""
    out = ""
    for part in loc:
        if part in ("body", "query", "path", "header"):
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(KickoffError)
    async def kickoff_error(request: Request, exc: KickoffError) -> JSONResponse:
        status = status_of(exc)
        if status >= 500:
            logger.warning("%s %s answered %s: %s", request.method, request.url.path, status, exc)
        return JSONResponse({**error_body(exc), "request_id": _request_id(request)}, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        field = _field_of(tuple(first.get("loc", ())))
        return JSONResponse(
            {
                "error": f"{field}: {_message_of(first)}",
                "field": field,
                "errors": [
                    {"field": _field_of(tuple(e.get("loc", ()))), "msg": _message_of(e)} for e in errors
                ],
                "request_id": _request_id(request),
            },
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        if exc.status_code == 405:  # every method of the path, not only the first route's
            headers["Allow"] = ", ".join(allowed_methods(request.app, request.scope))
        return JSONResponse(
            {"error": exc.detail, "request_id": _request_id(request)},
            status_code=exc.status_code,
            headers=headers or None,
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("%s %s failed", request.method, request.url.path)
        return JSONResponse(
            {"error": "internal error", "request_id": _request_id(request)},
            status_code=500,
            headers=ANSWER_HEADER_DICT,  # answered outside EdgeGuard (Starlette's ServerErrorMiddleware)
        )


def _message_of(error: dict[str, Any]) -> str:
    """A validation error's message; text that is no Unicode (a lone surrogate) says so as the
    library's one text check does (config.feed_text), not as pydantic's "unable to parse raw data"."""
    if error.get("type") == "string_unicode":
        return unstorable_text(error.get("input")) or "is not valid UTF-8 text"
    return str(error.get("msg"))


#: FastAPI's own OpenTelemetry (newer releases: a server span per request on the global tracer provider)
#: is turned off: the request's span is api.middleware's, so a request has one, whatever the release.
_NO_NATIVE_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


def create_app(settings: KickoffSettings | None = None, *, freeze_boot_heap: bool = False) -> FastAPI:
    """Build the application on ``settings`` (default: KickoffSettings read from the environment once).

    ``freeze_boot_heap`` (``kickoff serve``): once booted, the objects made so far are left out of the
    garbage collector's passes (``gc.freeze``); a test process building many apps keeps them in."""
    ctx = ApiContext(settings=settings or load_settings())

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        ctx.boot()
        if freeze_boot_heap:
            # What boot made (modules, the app, pools) lives as long as the process: kept out of the
            # collector's full passes, each of which scanned it all (about 150,000 objects, 60-70 ms,
            # about every 1,000 triggers under load: the collector was 6 % of a trigger's CPU, and
            # those passes the longest pauses of the event loop)
            gc.freeze()
        yield
        ctx.close()

    app = FastAPI(
        title="kickoff",
        description=DESCRIPTION,
        version="1",
        redoc_url=None,
        docs_url=None,  # api/docs.py: Swagger UI from the package, not a CDN
        dependencies=[Depends(authorize)],
        lifespan=lifespan,
        **_NO_NATIVE_TELEMETRY,
    )
    app.state.ctx = ctx
    app.state.key_cache = KeyCache(ctx.settings.api_key_cache_seconds)
    app.state.metrics = ApiMetrics(ctx)
    app.include_router(health.router)
    app.include_router(triggers.build_router())  # from the trigger queues declared now
    for module in (trades, actions, runs, listeners, audit, history, apikeys, contract):
        app.include_router(module.router)
    install_console(app)
    install_docs(app)
    install_openapi(app, catalog=lambda: ctx.catalog)
    _install_error_handlers(app)
    app.add_middleware(
        RequestLayer, max_body_bytes=ctx.settings.api_max_body_bytes, metrics=app.state.metrics
    )
    app.add_middleware(  # outermost: before anything reads a header
        EdgeGuard,
        max_header_bytes=ctx.settings.api_max_header_bytes,
        max_cookie_bytes=ctx.settings.api_max_cookie_bytes,
        hosts=allowed_hosts(ctx.settings.api_allowed_hosts, ctx.settings.api_host),
    )
    return app


def app_from_env() -> FastAPI:
    """uvicorn's factory (``api.app:app_from_env``): settings from the environment, tracing from OTEL_*."""
    configure_tracing(service="kickoff-api")
    return create_app(freeze_boot_heap=True)

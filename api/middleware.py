"""The ASGI layer around every request: X-Request-Id, JSON-only bodies (415), the body limit (413).

The JSON-only rule is the JSON API's (paths under /v1/); the console at / posts HTML forms.

Pure ASGI (no per-request task): the body is read here up to the limit and replayed to the app.
It also times trigger and trade routes for the latency histogram, and while tracing is on makes the
request's server span (``METHOD /route/{template}``, its parent the caller's W3C ``traceparent``),
current while the app runs: kickoff's own, as OpenTelemetry's FastAPI instrumentation cost a
trigger more CPU than issue 41's 5 % (docs/tracing.md). Probes and scrapes make no span.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from config import spans, tracing

if TYPE_CHECKING:
    from api.metrics import ApiMetrics

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

REQUEST_ID_HEADER = "X-Request-Id"
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: Paths whose request bodies must be JSON (the console's form posts live outside it).
JSON_API_PREFIX = "/v1/"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _request_id(scope: Scope) -> str:
    """The caller's X-Request-Id when it is a short safe token, else a fresh one."""
    given = _header(scope, b"x-request-id")
    return given if given and _SAFE_ID.match(given) else uuid.uuid4().hex


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class RequestLayer:
    """X-Request-Id on every response, the JSON-only rule and the body size limit."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, metrics: ApiMetrics) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        request_id = _request_id(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        status_seen: list[int] = []
        span = _server_span(scope) if tracing.enabled() else None
        token = spans.attach(span)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_seen.append(message["status"])
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        refused = None
        replay: Receive = receive
        if scope["method"] in _BODY_METHODS:
            refused, replay = await self._read_body(scope, receive)
        error: BaseException | None = None
        try:
            if refused is not None:
                status, message = refused
                await _send_error(send_with_id, status, message, request_id)
            else:
                await self.app(scope, replay, send_with_id)
        except BaseException as exc:
            error = exc
            raise
        finally:
            spans.detach(token)
            route = scope.get("route")
            path = getattr(route, "path", None)
            if span is not None:
                _end_server_span(span, scope, request_id, path, status_seen, error)
        if path is not None and status_seen:
            self.metrics.observe_request(path, status_seen[0], time.perf_counter() - started)

    async def _read_body(self, scope: Scope, receive: Receive) -> tuple[tuple[int, str] | None, Receive]:
        length = _header(scope, b"content-length")
        chunked = (_header(scope, b"transfer-encoding") or "").lower() == "chunked"
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            return (413, f"request body larger than {self.max_body_bytes} bytes"), receive
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return (413, f"request body larger than {self.max_body_bytes} bytes"), receive
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        json_only = scope.get("path", "").startswith(JSON_API_PREFIX)
        has_body = body or chunked or (length not in (None, "0"))
        if json_only and has_body and not _is_json(_header(scope, b"content-type")):
            return (415, "request bodies must be JSON (Content-Type: application/json)"), receive
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return None, replay


#: Paths whose requests make no span: probes and scrapes are no work anyone traces.
UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def _server_span(scope: Scope) -> Any:
    """The request's server span (None for a probe), its parent the caller's ``traceparent`` if valid."""
    if scope.get("path") in UNTRACED_PATHS:
        return None
    carrier = {
        spans.TRACEPARENT: _header(scope, b"traceparent"),
        spans.TRACESTATE: _header(scope, b"tracestate"),
    }
    # its attributes are set as it ends, all at once (one call into the SDK fewer per request)
    return spans.start_span(
        scope["method"],
        parent={k: v for k, v in carrier.items() if v is not None},
        kind=spans.SpanKind.SERVER,
    )


def _end_server_span(
    span: Any,
    scope: Scope,
    request_id: str,
    route: str | None,
    status: list[int],
    error: BaseException | None,
) -> None:
    """Name the span by its route (``POST /v1/trigger/lineup``) and end it with the status answered."""
    if route is not None:
        span.update_name(f"{scope['method']} {route}")
    code = status[0] if status else None
    failed = error if error is not None else (f"HTTP {code}" if code is not None and code >= 500 else None)
    attributes = {
        "http.request.method": scope["method"],
        "http.route": route,
        "http.response.status_code": code,
        "kickoff.request_id": request_id,
    }
    spans.end_span(span, error=failed, **attributes)


async def _send_error(send: Send, status: int, error: str, request_id: str) -> None:
    body = json.dumps({"error": error, "request_id": request_id}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})

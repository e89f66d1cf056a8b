"""Request headers the routes read: W3C ``traceparent``, ``X-Run-Id``; the caller and request id (audit)."""

from __future__ import annotations

import uuid

from fastapi import Request

from api.context import ApiContext
from models.audit import Actor, AuditContext
from publisher.errors import TriggerValidationError
from publisher.run_context import RUN_ID_HEADER
from publisher.trace import TRACEPARENT_HEADER, is_valid_traceparent


def ctx_of(request: Request) -> ApiContext:
    """The ApiContext of the application serving ``request``."""
    return request.app.state.ctx


def traceparent(request: Request, body_value: str | None) -> str | None:
    """The body's traceparent, else a valid ``traceparent`` header (an invalid header is ignored, per W3C)."""
    if body_value is not None:
        return body_value
    header = request.headers.get(TRACEPARENT_HEADER)
    if header and is_valid_traceparent(header.strip()):
        return header.strip()
    return None


def run_id(request: Request) -> str | None:
    """The ``X-Run-Id`` header (a run id is a UUID; anything else is refused naming the header)."""
    value = request.headers.get(RUN_ID_HEADER)
    if value is None:
        return None
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError as exc:
        raise TriggerValidationError(RUN_ID_HEADER, f"not a run id (UUID): {value[:64]!r}") from exc


def actor_of(request: Request) -> Actor:
    """The API key that authenticated ``request`` (api.auth.authorize), as the audit log's actor."""
    return Actor.api_key(request.state.api_key_id, request.state.api_key_name)


def key_id_of(request: Request) -> str | None:
    """The id of the API key that authenticated ``request`` (None on a public route)."""
    return getattr(request.state, "api_key_id", None)


def request_id_of(request: Request) -> str | None:
    """The request's X-Request-Id (api.middleware)."""
    return getattr(request.state, "request_id", None)


def audit_of(request: Request, reason: str | None = None) -> AuditContext:
    """What an act ``request`` asks for is audited with: its API key, ``reason`` and its request id."""
    return AuditContext(actor_of(request), reason=reason, request_id=request_id_of(request))

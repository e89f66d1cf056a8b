"""One mapping from the KickoffError tree to HTTP answers: status code and a JSON body naming the problem."""

from __future__ import annotations

import logging
from typing import Any

from config.errors import (
    CatalogError,
    ConfigurationError,
    InvalidRunParams,
    InvalidTrigger,
    KickoffError,
    ListenerStartSettingsError,
    NotFound,
    PublishError,
    ServiceUnavailable,
    StartAttemptsExhausted,
    StreamLimitReached,
    TradeError,
    TriggerConflictError,
    TriggerUnavailableError,
    TriggerValidationError,
    UnknownJob,
)

logger = logging.getLogger(__name__)

# Most specific first: the first class in an error's MRO found here decides its status.
STATUS_OF: dict[type[KickoffError], int] = {
    TriggerValidationError: 422,
    InvalidRunParams: 422,
    InvalidTrigger: 422,
    UnknownJob: 422,
    ListenerStartSettingsError: 422,
    TriggerConflictError: 409,
    StreamLimitReached: 429,
    StartAttemptsExhausted: 409,
    TradeError: 409,
    TriggerUnavailableError: 503,
    NotFound: 404,
    ServiceUnavailable: 503,
    PublishError: 503,
    CatalogError: 500,
    ConfigurationError: 500,
    KickoffError: 500,
}

# Errors whose field is known without a ``field`` attribute.
FIELD_OF: dict[type[KickoffError], str] = {UnknownJob: "job", InvalidRunParams: "params"}


def status_of(exc: KickoffError) -> int:
    """The HTTP status of ``exc``: its most specific class in STATUS_OF."""
    for cls in type(exc).__mro__:
        if cls in STATUS_OF:
            return STATUS_OF[cls]
    return 500


def error_body(exc: KickoffError) -> dict[str, Any]:
    """The JSON answer of ``exc``: ``error`` (its message), ``field`` and ``tracking_id`` when known."""
    body: dict[str, Any] = {"error": str(exc)}
    field = getattr(exc, "field", None)
    if field is None:
        field = next((f for cls, f in FIELD_OF.items() if isinstance(exc, cls)), None)
    if field is not None:
        body["field"] = field
    tracking_id = getattr(exc, "tracking_id", None)
    if tracking_id is not None:
        body["tracking_id"] = tracking_id
    if getattr(exc, "retryable", False) or isinstance(exc, ServiceUnavailable):
        body["retryable"] = True
    return body

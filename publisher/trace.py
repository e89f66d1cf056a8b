"""W3C trace context: build and check ``traceparent`` values for message bodies and AMQP headers."""

from __future__ import annotations

import re
import secrets

from publisher.errors import TriggerValidationError

TRACEPARENT_HEADER = "traceparent"

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def new_traceparent(*, sampled: bool = True) -> str:
    """Return a fresh version-00 traceparent (random trace id and span id)."""
    trace_id = secrets.token_hex(16)
    span_id = secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


def is_valid_traceparent(value: str) -> bool:
    """True for a version-00 traceparent whose trace id and span id are not all zeros."""
    match = _TRACEPARENT.match(value)
    if match is None:
        return False
    return set(match.group(1)) != {"0"} and set(match.group(2)) != {"0"}


def check_traceparent(value: str | None) -> str | None:
    """Return ``value`` if it is None or a valid traceparent, else refuse the ``traceparent`` field."""
    if value is None:
        return None
    if not isinstance(value, str) or not is_valid_traceparent(value):
        raise TriggerValidationError("traceparent", f"not a W3C traceparent: {value!r}")
    return value


def trace_headers(traceparent: str | None) -> dict[str, str]:
    """The AMQP headers that carry ``traceparent`` (empty when there is none)."""
    return {TRACEPARENT_HEADER: traceparent} if traceparent else {}

"""The ASGI guard in front of everything: header sizes (431), the Host allowlist (400), safe answer headers.

It runs before any other layer reads the request: a header block over API_MAX_HEADER_BYTES or a
Cookie over API_MAX_COOKIE_BYTES is answered 431 before a cookie reaches ``http.cookies`` (whose
parser is quadratic on CPython 3.11, CVE-2024-7592, and runs on the event loop); a Host outside
API_ALLOWED_HOSTS is answered 400 (DNS rebinding). Every answer carries
``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin``.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import Iterable

from api.middleware import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

#: Headers added to every answer that does not set them itself.
ANSWER_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
#: ANSWER_HEADERS for a response the guard does not wrap (Starlette answers an unhandled error outside it).
ANSWER_HEADER_DICT: dict[str, str] = {name.decode(): value.decode() for name, value in ANSWER_HEADERS}
#: The hosts API_ALLOWED_HOSTS means when empty (API_HOST is added).
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def allowed_hosts(setting: str, bind_host: str) -> tuple[str, ...]:
    """The host patterns of API_ALLOWED_HOSTS (``setting``); empty: the localhost names and ``bind_host``."""
    given = tuple(h.strip().lower().strip("[]") for h in setting.split(",") if h.strip())
    return given or (*LOCAL_HOSTS, bind_host.strip().lower().strip("[]"))


#: A whole Host header value: a name or IPv4 address, or a bracketed IPv6 address, then an optional port.
HOST_VALUE = re.compile(r"^(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[a-z0-9_.-]+))(?::[0-9]{1,5})?$")


def host_of(value: str) -> str:
    """The host of a ``Host`` header value, lower-case, without port or IPv6 brackets; "" when the value
    is no ``host[:port]`` at all (``127.0.0.1:1@evil``, userinfo, a path), so no allowlist matches it."""
    value = value.strip().lower()
    found = HOST_VALUE.match(value)
    if found is None:
        try:
            return str(ipaddress.IPv6Address(value))  # a bare IPv6 address
        except ValueError:
            return ""
    return found.group("v6") or found.group("name") or ""


def host_allowed(host: str, patterns: Iterable[str]) -> bool:
    """Whether ``host`` matches one of ``patterns`` (``*`` any, ``*.example.com`` its subdomains)."""
    for pattern in patterns:
        if pattern == "*" or host == pattern:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
    return False


class EdgeGuard:
    """431 for oversized headers or Cookie, 400 for an unknown Host; nosniff and Referrer-Policy otherwise."""

    def __init__(
        self, app: ASGIApp, *, max_header_bytes: int, max_cookie_bytes: int, hosts: tuple[str, ...]
    ) -> None:
        self.app = app
        self.max_header_bytes = max_header_bytes
        self.max_cookie_bytes = max_cookie_bytes
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self._refusal(scope)
        if refused is not None:
            status, error = refused
            logger.info("%s %s refused (%s): %s", scope.get("method"), scope.get("path"), status, error)
            await _send_error(send, status, error)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = _with_answer_headers(message.get("headers", []))
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        headers = scope.get("headers", ())
        cookie = sum(len(value) for name, value in headers if name == b"cookie")
        if cookie > self.max_cookie_bytes:
            return 431, f"Cookie header larger than {self.max_cookie_bytes} bytes (API_MAX_COOKIE_BYTES)"
        block = sum(len(name) + len(value) for name, value in headers)
        if block > self.max_header_bytes:
            return 431, f"request headers larger than {self.max_header_bytes} bytes (API_MAX_HEADER_BYTES)"
        host = next((value for name, value in headers if name == b"host"), b"").decode("latin-1")
        if not host_allowed(host_of(host), self.hosts):
            return 400, "unknown Host header (API_ALLOWED_HOSTS)"
        return None


def _with_answer_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    out = list(headers)
    present = {name.lower() for name, _ in out}
    out.extend(header for header in ANSWER_HEADERS if header[0] not in present)
    return out


async def _send_error(send: Send, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": _with_answer_headers(headers)})
    await send({"type": "http.response.body", "body": body})

"""A real HTTP server that fails on purpose: answers from a script, records what it received."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.waiting import wait_for


@dataclass
class Script:
    """Answers in order (status, body); the last one repeats. Requests are recorded.

    A status of 0 is "hang": the request gets no answer until the client gives up.
    """

    answers: list[tuple[int, dict[str, Any]]]
    received: list[dict[str, Any]] = field(default_factory=list)
    hang_seconds: float = 5.0

    def next(self) -> tuple[int, dict[str, Any]]:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@contextmanager
def failing_server(script: Script) -> Iterator[str]:
    """Serve ``script`` on a free port in a thread; yields the base URL."""

    async def answer(request: Request) -> JSONResponse:
        script.received.append({"headers": dict(request.headers), "body": await request.json()})
        status, body = script.next()
        if status == 0:
            await asyncio.sleep(script.hang_seconds)
            return JSONResponse({"error": "too late"}, status_code=504)
        return JSONResponse(body, status_code=status)

    app = Starlette(routes=[Route("/v1/trigger/{name}", answer, methods=["POST"])])
    sock = socket.socket()  # bound here, so no other process can take the port meanwhile
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=60, what="the failing server to start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()

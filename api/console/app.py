"""Mount the console on the API's application: its routers and the sign-in redirect."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse

from api.console.board_feed import BoardHub
from api.console.routes import access, audit, board, bulk, keys, match, publishing, queues, trades
from api.console.throttle import SignInThrottle
from api.console.web import templates
from config.errors import SignInRequired

#: The console's routers, each route declaring its need (api.auth.requires).
ROUTERS = tuple(m.router for m in (access, board, bulk, match, publishing, queues, trades, audit, keys))


def install_console(app: FastAPI) -> None:
    """Add the console's pages, actions and sign-in throttle to ``app`` (the JSON API keeps /v1, /healthz...).

    ``app.state.ctx`` is set before.
    """
    for router in ROUTERS:
        app.include_router(router)
    app.state.sign_in_throttle = SignInThrottle(app.state.ctx.settings.console_sign_in_failures_per_minute)
    ctx = app.state.ctx
    app.state.board_hub = BoardHub(
        settings=ctx.settings,
        barriers=lambda: ctx.barriers,
        rows_template=templates.get_template("_board_rows.html"),
        reads=app.state.metrics.board_reads,
        streams=app.state.metrics.board_streams,
    )

    @app.exception_handler(SignInRequired)
    async def sign_in_first(_request: Request, exc: SignInRequired) -> RedirectResponse:
        return RedirectResponse("/sign-in?" + urlencode({"next": exc.next_path}), status_code=303)

"""Mount the console on the API's application: its routers and the sign-in redirect."""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse

from api.console.board_feed import BoardHub, LiveView
from api.console.board_view import BoardFilter, BoardRow, WindowCaches, board_rows, matches_rows, matches_url
from api.console.routes import (
    access,
    audit,
    board,
    bulk,
    history,
    keys,
    match,
    matches,
    publishing,
    queues,
    trades,
)
from api.console.throttle import SignInThrottle
from api.console.web import templates
from api.errors import SignInRequired
from lifecycle.board import BoardCache
from lifecycle.matches_board import MatchesCache, MatchesQuery

#: The console's routers, each route declaring its need (api.auth.requires).
ROUTERS = tuple(
    m.router for m in (access, board, matches, bulk, match, history, publishing, queues, trades, audit, keys)
)


def install_console(app: FastAPI) -> None:
    """Add the console's pages, actions and sign-in throttle to ``app`` (the JSON API keeps /v1, /healthz...).

    ``app.state.ctx`` is set before.
    """
    for router in ROUTERS:
        app.include_router(router)
    settings = app.state.ctx.settings
    app.state.sign_in_throttle = SignInThrottle(
        settings.console_sign_in_failures_per_minute, trust_address=settings.api_proxy_headers
    )
    ctx = app.state.ctx
    app.state.matches_caches = WindowCaches()
    hub = app.state.board_hub = BoardHub(
        settings=ctx.settings,
        coordination=lambda: ctx.coordination,
        reads=app.state.metrics.board_reads,
        streams=app.state.metrics.board_streams,
    )

    def read_board(flt: BoardFilter, cache: BoardCache) -> tuple[list[BoardRow], int]:
        rows, _ = board_rows(flt, settings=ctx.settings, coordination=ctx.coordination, cache=cache)
        return rows, len(rows)

    def read_matches(query: MatchesQuery, cache: MatchesCache) -> tuple[list[BoardRow], int]:
        rows, page = matches_rows(
            query, settings=ctx.settings, coordination=ctx.coordination, cache=cache, leagues=[]
        )
        return rows, page.total

    hub.add_view(
        BoardFilter,
        LiveView(read_board, templates.get_template("_board_rows.html"), BoardCache, lambda _flt: "/"),
    )
    hub.add_view(
        MatchesQuery,
        LiveView(read_matches, templates.get_template("_matches_rows.html"), MatchesCache, matches_url),
    )

    @app.exception_handler(SignInRequired)
    async def sign_in_first(_request: Request, exc: SignInRequired) -> RedirectResponse:
        return RedirectResponse("/sign-in?" + urlencode({"next": exc.next_path}), status_code=303)

"""The Matches board at /matches: every match of a window, filtered, searched, sorted, paged; live."""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from api.auth import Need, requires
from api.console.board_view import matches_rows, matches_url
from api.console.routes.board import live_stream
from api.console.routes.bulk import bulk_choices
from api.console.web import PageSession, StreamSession, render
from api.headers import ctx_of
from config.clock import utcnow
from config.errors import InvalidQuery
from lifecycle.leagues import league_names
from lifecycle.matches_board import (
    BADGES,
    PAGE_SIZES,
    SORTS,
    STATUSES,
    MatchesQuery,
    matches_query,
)
from models.db import release_connection

logger = logging.getLogger(__name__)

#: Every page here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])

#: The table's columns: (sort key, header); a sortable column's header links to that sort.
COLUMNS = (
    ("title", "Match"),
    ("league", "League"),
    ("scheduled", "Scheduled (UTC)"),
    ("status", "Status"),
    ("badge", "Badge"),
    ("dispatch", "Dispatch"),
    ("last_run", "Last run"),
    ("", "Gaps"),
)
#: The query's parameters, as typed (every one is text: the library checks each and names a bad one).
PARAMS = ("from", "to", "league", "status", "badge", "q", "sort", "dir", "page", "per")


def typed(
    request: Request,
) -> dict[str, str]:
    """The Matches board's parameters as typed ("" when absent; a repeated one: its first value)."""
    return {name: request.query_params.get(name, "") for name in PARAMS}


Typed = Annotated[dict[str, str], Depends(typed)]


def _query(values: dict[str, str], leagues: list[str] | None) -> MatchesQuery:
    return matches_query(
        today=utcnow().date(),
        day_from=values["from"],
        day_to=values["to"],
        league=values["league"],
        status=values["status"],
        badge=values["badge"],
        q=values["q"],
        sort=values["sort"],
        direction=values["dir"],
        page=values["page"],
        per=values["per"],
        leagues=leagues,
    )


def _sorting(query: MatchesQuery) -> tuple[dict[str, str], dict[str, str]]:
    """Each column's link (the same column again: the other direction) and its aria-sort state."""
    urls: dict[str, str] = {}
    state: dict[str, str] = {}
    for name, _label in COLUMNS:
        if not name:
            urls[name], state[name] = "", ""
            continue
        current = name == query.sort
        urls[name] = matches_url(query, sort=name, descending=current and not query.descending, page=1)
        state[name] = ("descending" if query.descending else "ascending") if current else ""
    return urls, state


@router.get("/matches")
def matches_page(request: Request, session: PageSession, values: Typed) -> Response:
    """The Matches board: the window's matches (default: yesterday to two days ahead), filters,
    sorting, paging, per-row and bulk actions; a bad parameter is the page with its message (422)."""
    ctx = ctx_of(request)
    leagues = league_names()
    release_connection()
    choices: dict[str, Any] = {
        "leagues": leagues,
        "statuses": STATUSES,
        "badges": BADGES,
        "sorts": tuple(SORTS),
        "page_sizes": PAGE_SIZES,
        "columns": COLUMNS,
    }
    if session.can_act:
        choices.update(bulk_choices())
    try:
        query = _query(values, leagues)
        with request.app.state.matches_caches.of(query) as cache:
            rows, page = matches_rows(
                query, settings=ctx.settings, coordination=ctx.coordination, cache=cache, leagues=leagues
            )
    except InvalidQuery as exc:
        logger.info("matches board query refused: %s", exc)
        past_end = exc.field == "page"
        fallback = None
        if past_end:
            fallback = _query({**values, "page": ""}, leagues)
        form = {**values}
        form["per"] = form["per"] or str(PAGE_SIZES[2])
        return render(
            request,
            "matches.html",
            status_code=422,
            error=str(exc),
            form=form,
            reset_url=matches_url(fallback) if fallback else "/matches",
            reset_text="Go to the first page" if past_end else "Show the default window, every match",
            **choices,
        )
    urls, state = _sorting(query)
    pages = page.pages
    form = query.params()
    form.setdefault("q", "")
    for name in ("league", "status", "badge"):
        form.setdefault(name, "")
    return render(
        request,
        "matches.html",
        rows=rows,
        page=page,
        query=query,
        form=form,
        here=matches_url(query),
        stream_url="/events/matches?" + matches_url(query).split("?", 1)[1],
        sort_urls=urls,
        sort_state=state,
        prev_url=matches_url(query, page=query.page - 1) if query.page > 1 else "",
        next_url=matches_url(query, page=query.page + 1) if query.page < pages else "",
        last_url=matches_url(query, page=pages),
        **choices,
    )


@router.get("/events/matches")
async def matches_events(request: Request, session: StreamSession, values: Typed) -> StreamingResponse:
    """Server-sent events: the Matches board page's rows whenever they change (as /events/board: every
    stream of one query shares one reading per interval). A bad parameter is 422."""
    query = _query(values, None)
    return live_stream(request, session, query)

"""The Audit page (/audit): the audit log, newest first, with the filters of `kickoff audit list`."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.auth import Need, requires
from api.console.web import PageSession, render
from config.clock import parse_iso8601
from config.errors import InvalidTimeError
from lifecycle.match_ref import resolve_match_id
from models.audit import audit_entries
from models.errors import MatchNotFound

#: Every page and action here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])

#: Entries the page shows at most.
PAGE_LIMIT = 200


def _json_text(value: Any) -> str:
    return "" if value is None else json.dumps(value, sort_keys=True, default=str)


@router.get("/audit")
def audit_page(
    request: Request, session: PageSession, who: str = "", action: str = "", match: str = "", since: str = ""
) -> Response:
    """Audit entries, newest first, filtered by who, action, match (id or sr_id) and since (ISO 8601)."""
    problems: list[str] = []
    when = None
    if since.strip():
        try:
            when = parse_iso8601(since, what="since")
        except InvalidTimeError as exc:
            problems.append(str(exc))
    match_id = None
    if match.strip():
        try:
            match_id = resolve_match_id(match.strip())
        except MatchNotFound as exc:
            problems.append(str(exc))
    entries = (
        []
        if problems
        else audit_entries(
            who=who.strip() or None,
            action=action.strip() or None,
            match_id=match_id,
            since=when,
            limit=PAGE_LIMIT,
        )
    )
    rows = [{**e.as_dict(), "before": _json_text(e.before), "after": _json_text(e.after)} for e in entries]
    return render(
        request,
        "audit.html",
        rows=rows,
        who=who,
        action=action,
        match=match,
        since=since,
        problems=problems,
        limit=PAGE_LIMIT,
        here=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
    )

"""/v1/audit: the audit log, newest first, with the filters of `kickoff audit list`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.exceptions import RequestValidationError

from api.auth import Need, limited_key, reads_league, requires
from api.errors import error_responses
from api.schemas import MAX_ID_LENGTH, NON_BLANK, QueryId, aware_time
from lifecycle.match_ref import resolve_match_id
from models.audit import audit_entries

router = APIRouter(tags=["audit"])

QueryTime = Annotated[
    str | None,
    Query(max_length=64, json_schema_extra={"format": "date-time"}, description="ISO 8601 with an offset."),
]
QueryText = Annotated[str | None, Query(min_length=1, max_length=MAX_ID_LENGTH, pattern=NON_BLANK)]


@router.get("/v1/audit", dependencies=[requires(Need.READ)], responses=error_responses(404))
def audit_list(
    request: Request,
    who: QueryText = None,
    action: QueryText = None,
    match_id: QueryId = None,
    since: QueryTime = None,
    limit: int = Query(100, ge=1, le=10_000),
) -> dict[str, Any]:
    """Audit entries, newest first (as `kickoff audit list --json`): ``{"entries": [...]}``; an unknown
    ``match_id`` (internal id or sr_id) is 404."""
    when = None
    if since is not None:
        try:
            when = aware_time(since)
        except ValueError as exc:
            raise RequestValidationError(
                [{"loc": ("query", "since"), "msg": str(exc), "type": "value_error"}]
            ) from exc
    entries = audit_entries(
        who=who,
        action=action,
        match_id=None if match_id is None else resolve_match_id(match_id),
        since=when,
        limit=limit,
    )
    limited = limited_key(request)
    if limited is not None:  # its own acts, and acts on matches of its leagues
        entries = [
            e
            for e in entries
            if e.who_key_id == limited.id or (e.league is not None and reads_league(request, e.league))
        ]
    return {"entries": [e.as_dict() for e in entries]}

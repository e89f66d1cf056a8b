"""The Queues page (the queue contract explorer): each queue, payload schema, required fields, examples."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.auth import Need, requires
from api.console.web import PageSession, render
from publisher.contract import channel_contracts

#: Every page and action here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON text (the template escapes it like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


@router.get("/queues")
def queues_page(request: Request, session: PageSession) -> Response:
    """Every channel of the AsyncAPI contract, in its order, with links to the whole document."""
    return render(request, "queues.html", channels=channel_contracts(), pretty_json=pretty_json)

"""The History page (/history): a chart per history series over 1 h, 24 h or 7 d, with its numbers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from api.auth import Need, requires
from api.console.web import PAGE_HEADERS, PageSession, StreamSession, render
from api.errors import public_message, status_of
from config.errors import InvalidQuery, KickoffError
from models.history import HistoryAnswer, history
from models.history_series import ALL, MAX_TOP, RANGES

#: Every page here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])

#: The page's sections, each with its charts (series names), in the order an operator reads them.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Listeners", ("listeners", "listener_ends")),
    ("Events", ("events",)),
    ("Takeovers and gaps", ("takeovers", "gaps", "gap_seconds")),
    ("Outbox", ("outbox_depth", "outbox_published")),
    ("Triggers", ("triggers",)),
    ("Job runs", ("job_runs", "job_run_seconds")),
)


@dataclass(frozen=True)
class LineSummary:
    """One line of a chart in words: its name, latest value, peak and mean over the range."""

    key: str
    label: str
    latest: float | None
    peak: float | None
    mean: float | None


def summary(answer: HistoryAnswer) -> list[LineSummary]:
    """Each line of ``answer`` summarised (what the page shows beside the chart, and without script)."""
    out = []
    for key, values in answer.values.items():
        present = [v for v in values if v is not None]
        out.append(
            LineSummary(
                key=key,
                label=answer.labels.get(key, key),
                latest=next((v for v in reversed(values) if v is not None), None),
                peak=max(present) if present else None,
                mean=round(sum(present) / len(present), 3) if present else None,
            )
        )
    return out


def _range(value: str) -> str:
    if value not in RANGES:
        raise InvalidQuery(f"range is one of {', '.join(RANGES)}, not {value[:20]!r}", field="range")
    return value


@router.get("/history")
async def history_page(request: Request, session: PageSession, range: str = "1h") -> Response:
    """A chart per series (drawn by the page's script from /history/data), each with its lines' numbers."""
    try:
        span = _range(range)
        charts = await run_in_threadpool(
            lambda: {name: history(name, range_name=span) for _, names in SECTIONS for name in names}
        )
    except KickoffError as exc:
        return render(
            request,
            "history.html",
            status_code=status_of(exc),
            error=public_message(exc),
            ranges=RANGES,
            span="1h",
            sections=(),
        )
    sections = [(title, [(charts[n], summary(charts[n])) for n in names]) for title, names in SECTIONS]
    return render(request, "history.html", ranges=RANGES, span=span, sections=sections, all_key=ALL)


@router.get("/history/data/{series}")
async def history_data(
    series: str, request: Request, session: StreamSession, range: str = "1h", key: str = "", top: str = ""
) -> Response:
    """One series as JSON for the page's charts (the same answer as ``GET /v1/history/{series}``);
    a bad parameter is 422 with its message; without a live session 401 (a script's data is not
    redirected to the sign-in form)."""
    try:
        span = _range(range)
        count = int(top) if top.isdigit() and len(top) < 4 else (8 if not top else -1)
        if not 1 <= count <= MAX_TOP:
            raise InvalidQuery(f"top is from 1 to {MAX_TOP}", field="top")
        answer = await run_in_threadpool(
            lambda: history(series, range_name=span, key=key[:200] or None, top=count)
        )
    except KickoffError as exc:
        return JSONResponse({"error": public_message(exc)}, status_code=status_of(exc), headers=PAGE_HEADERS)
    data: dict[str, Any] = answer.as_dict()
    return JSONResponse(data, headers=PAGE_HEADERS)

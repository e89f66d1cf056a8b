"""/v1/history/{series}: one history series over 1 h, 24 h or 7 d, as the console's charts draw it."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field

from api.auth import Need, limited_key, requires
from api.schemas import MAX_ID_LENGTH, NON_BLANK, aware_time
from config.errors import Forbidden
from models.history import history
from models.history_series import DEFAULT_TOP, MAX_TOP, RANGES, SERIES

router = APIRouter(tags=["history"])

SeriesName = Literal[tuple(SERIES)]  # type: ignore[valid-type]
RangeName = Literal[tuple(RANGES)]  # type: ignore[valid-type]


class HistoryAnswer(BaseModel):
    """One series over a range, bucketed: the bucket start times and one value per bucket for each line."""

    series: str
    title: str = Field(description="What the series counts.")
    unit: str = Field(description="A value's unit (a counter's is per minute).")
    kind: Literal["counter", "gauge"] = Field(
        description="counter: a bucket is the mean per minute; gauge: the mean of its readings."
    )
    keyed_by: str = Field(description='What the keys are ("": one line).')
    source: str = Field(description="Where the numbers come from.")
    range: RangeName
    step_seconds: int = Field(description="The length of a bucket.")
    start: str = Field(description="The first bucket's start (ISO 8601).")
    end: str = Field(description="The end of the range (ISO 8601).")
    times: list[int] = Field(description="Each bucket's start, Unix seconds.")
    values: dict[str, list[float | None]] = Field(
        description='"all" (every key summed) and the busiest keys: one value per bucket (null: no reading).'
    )
    labels: dict[str, str] = Field(
        description='Each line\'s name (a match: its title and league, "HOU @ KC (mlb)").'
    )
    keys: int = Field(
        description="Keys with a point in the range (only the busiest have a line of their own)."
    )


@router.get("/v1/history/{series}", dependencies=[requires(Need.READ)])
def history_series(
    request: Request,
    series: Annotated[SeriesName, Path(description="The series (docs/api.md lists each).")],
    range: Annotated[
        RangeName, Query(description="The span: 1h (1 min buckets), 24h (5 min), 7d (30 min).")
    ] = "1h",
    key: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_ID_LENGTH,
            pattern=NON_BLANK,
            description="Only this key (a match id).",
        ),
    ] = None,
    top: Annotated[int, Query(ge=1, le=MAX_TOP, description="Keys with a line of their own.")] = DEFAULT_TOP,
    until: Annotated[
        str | None,
        Query(
            max_length=64,
            json_schema_extra={"format": "date-time"},
            description="End of the range (default: now).",
        ),
    ] = None,
) -> HistoryAnswer:
    """One history series (the console's History page draws the same): an unknown series or range, a
    ``top`` out of bounds or a malformed ``until`` is 422. The series count every league (and name
    each league's matches): a key limited to leagues is refused (403), as on the console."""
    limited = limited_key(request)
    if limited is not None:
        raise Forbidden(
            f"key {limited.name!r} is limited to league(s) {', '.join(limited.leagues or ())}: "
            "the history counts every league"
        )
    end = None
    if until is not None:
        try:
            end = aware_time(until)
        except ValueError as exc:
            raise RequestValidationError(
                [{"loc": ("query", "until"), "msg": str(exc), "type": "value_error"}]
            ) from exc
    answer = history(series, range_name=range, key=key, top=top, now=end)
    return HistoryAnswer(**answer.as_dict())

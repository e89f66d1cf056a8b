"""Value records as JSON-ready dicts: one conversion for the frozen dataclasses kickoff reports with."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from enum import Enum
from typing import Any


def _json_value(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, tuple):
        return list(value)
    return value


def _json_dict(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {name: _json_value(value) for name, value in items}


def json_fields(record: Any) -> dict[str, Any]:
    """Every field of the dataclass ``record`` in declaration order (nested records included):
    enums as their value, datetimes as ISO 8601 text, tuples as lists."""
    return asdict(record, dict_factory=_json_dict)

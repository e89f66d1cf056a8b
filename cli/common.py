"""Shared CLI helpers: KEY=VALUE parsing, JSON output, match id arguments."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from typing import Any

import click


def parse_assignments(pairs: Iterable[str], *, option: str) -> dict[str, Any]:
    """Parse ``KEY=VALUE`` strings; values are JSON when they parse as JSON, else strings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out[key.strip()] = value
    return out


def echo_json(obj: Any) -> None:
    """Print one JSON object on one line (for scripts)."""
    click.echo(json.dumps(obj, default=str, sort_keys=True))


class MatchIdType(click.ParamType):
    """An internal Match.id (UUID); anything else is one clear line."""

    name = "MATCH_ID"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return str(uuid.UUID(str(value)))
        except ValueError:
            self.fail(f"{value!r} is not a match id (the internal UUID, not the sr_id)", param, ctx)


MATCH_ID = MatchIdType()

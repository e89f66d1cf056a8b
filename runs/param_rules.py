"""The rules a job's params schema must follow: no parameter names a place, every value is bounded.

A run's params come from whoever may publish the job (a trigger key, say). So a catalog job may
not let that caller choose where the job reads or writes: no URL, host or path parameter (sources
and output locations come from settings), and no unbounded value (a number without both bounds, a
string or an array without a length bound). ``schema_problem`` names the first rule a declaration
breaks; the catalog refuses it at load time (runs.catalog.parse_catalog).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

#: A property whose name says it names a place: refused unless it is an ``enum`` of fixed names.
PLACE_NAME_RE = re.compile(r"(url|uri|host|path|dir|file|source|endpoint|address|location|dsn)", re.I)

#: Strings a string parameter's ``pattern`` must refuse: each names a place (URL, path, host:port).
PLACE_PROBES: tuple[str, ...] = (
    "http://169.254.169.254/latest",
    "file:///etc/passwd",
    "/etc/passwd",
    "../data",
    "a/b",
    "a\\b",
    "localhost:8080",
    "~root",
)

#: The largest ``maxLength`` / ``maxItems`` a parameter may declare.
MAX_LENGTH = 1000
MAX_ITEMS = 100


def _bounded_number(schema: Mapping[str, Any]) -> bool:
    low = "minimum" in schema or "exclusiveMinimum" in schema
    high = "maximum" in schema or "exclusiveMaximum" in schema
    return low and high


def _pattern_refuses_places(pattern: str) -> str | None:
    try:
        compiled = re.compile(pattern)
    except re.error:
        return f"pattern {pattern!r} is not a regular expression"
    for probe in PLACE_PROBES:
        if compiled.search(probe):
            return f"pattern {pattern!r} accepts {probe!r} (a place: URL, path or host)"
    return None


def _problem(schema: Any, where: str) -> str | None:
    """The first rule ``schema`` (at ``where``) breaks, or None."""
    if not isinstance(schema, Mapping):
        return f"{where} must be a schema object"
    if "enum" in schema or "const" in schema:
        return None  # fixed values chosen by the catalog, not by the caller
    kind = schema.get("type")
    if kind == "object":
        if schema.get("additionalProperties", True) is not False:
            return f"{where} must say additionalProperties: false"
        for name, sub in (schema.get("properties") or {}).items():
            inner = f"{where}/{name}"
            if PLACE_NAME_RE.search(str(name)) and not (isinstance(sub, Mapping) and "enum" in sub):
                return f"{inner} names a place (a URL, host or path come from settings, not params)"
            problem = _problem(sub, inner)
            if problem:
                return problem
        return None
    if kind in ("number", "integer"):
        if not _bounded_number(schema):
            return f"{where} must declare a minimum and a maximum"
        return None
    if kind == "string":
        if not isinstance(schema.get("maxLength"), int) or schema["maxLength"] > MAX_LENGTH:
            return f"{where} must declare a maxLength of at most {MAX_LENGTH}"
        if "pattern" not in schema:
            return f"{where} must declare a pattern (or an enum) that refuses URLs, paths and hosts"
        return _pattern_refuses_places(str(schema["pattern"]))
    if kind == "array":
        if not isinstance(schema.get("maxItems"), int) or schema["maxItems"] > MAX_ITEMS:
            return f"{where} must declare a maxItems of at most {MAX_ITEMS}"
        if "items" not in schema:
            return f"{where} must declare its items"
        return _problem(schema["items"], f"{where}/items")
    if kind == "boolean" or kind == "null":
        return None
    return f"{where} must declare one type (object, number, integer, string, array, boolean)"


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why a job's params schema breaks the rules (no place, every value bounded), or None."""
    if schema.get("type") != "object":
        return "params must be a JSON Schema of type object"
    return _problem(schema, "params")


def nonfinite_number(value: Any) -> bool:
    """True when ``value`` (JSON) holds an infinite or NaN number (JSON bodies may carry ``Infinity``)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, Mapping):
        return any(nonfinite_number(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(nonfinite_number(v) for v in value)
    return False

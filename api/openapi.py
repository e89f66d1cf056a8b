"""The OpenAPI document as the exact contract: every route's error statuses, the catalog's jobs.

Statuses every route of a kind can answer are derived here from each operation (its auth rule,
its body and its parameters), so no route can forget one; a route adds its own (409, 502, ...)
with ``responses=error_responses(...)`` on its decorator. Every error status has ErrorAnswer as
its body. The run body's ``job`` and ``params``
are the catalog's: one alternative per job, its params schema as the catalog declares it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jsonschema
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import iter_route_contexts
from starlette.routing import Match

from api.auth import Need, route_rules
from api.errors import ERROR_STATUSES, ErrorAnswer, FieldProblem
from api.middleware import JSON_API_PREFIX
from api.schemas import NO_NUL

REF = "#/components/schemas/{model}"

#: Statuses of a route that needs a key: no or a bad key, a narrow scope, PostgreSQL down (the key lookup).
KEYED = (401, 403, 503)
#: Statuses of a route with a JSON body: not JSON, too large, not of JSON's type, a refused field.
BODY = (400, 413, 415, 422)


def _statuses(
    method: str, path: str, operation: dict[str, Any], rules: Mapping[tuple[str, str], Need | None]
) -> set[int]:
    """The error statuses an operation answers by its kind: its auth rule, body and parameters."""
    statuses: set[int] = set()
    if rules.get((method.upper(), path)) not in (None, Need.PUBLIC, Need.CONSOLE):
        statuses.update(KEYED)
    if "requestBody" in operation and path.startswith(JSON_API_PREFIX):
        statuses.update(BODY)
    places = {p.get("in") for p in operation.get("parameters", [])}
    if "path" in places:
        statuses.update((404, 422))
    if "query" in places:
        statuses.add(422)
    return statuses


def document_error_statuses(schema: dict[str, Any], rules: Mapping[tuple[str, str], Need | None]) -> None:
    """Give every operation of ``schema`` the error statuses its kind answers, each an ErrorAnswer
    (``rules``: what each route needs, ``api.auth.route_rules``).

    A route's own entries (its decorator's ``responses``) stay; FastAPI's default 422 body is
    replaced by ErrorAnswer, the body the API really answers.
    """
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("FieldProblem", FieldProblem.model_json_schema(ref_template=REF))
    components.setdefault("ErrorAnswer", ErrorAnswer.model_json_schema(ref_template=REF))
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    body = {"application/json": {"schema": {"$ref": REF.format(model="ErrorAnswer")}}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status in sorted(
                _statuses(method, path, operation, rules) | {int(s) for s in responses if s.isdigit()}
            ):
                key = str(status)
                if status < 400 or status not in ERROR_STATUSES:
                    continue
                current = responses.get(key, {})
                if key == "422" or "content" not in current:
                    responses[key] = {"description": ERROR_STATUSES[status], "content": body}


def _close_pattern_objects(node: Any) -> None:
    """An object whose keys must match a pattern takes no other key: the validation refuses them."""
    if isinstance(node, dict):
        if "patternProperties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            _close_pattern_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_pattern_objects(value)


def allowed_methods(app: Any, scope: dict[str, Any]) -> list[str]:
    """Every method some route serves at the request's path (the Allow header of a 405)."""

    methods: set[str] = set()
    for context in iter_route_contexts(app.routes):
        match, _ = context.matches(scope)
        if match in (Match.FULL, Match.PARTIAL):
            methods.update(context.methods or ())
    return sorted(methods)


def _accepts_no_params(job: Any) -> bool:
    """True when the job's params schema accepts ``{}`` (the body may then leave params out)."""

    return jsonschema.Draft202012Validator(dict(job.params_schema)).is_valid({})


def _storable(schema: Any) -> Any:
    """A copy of a params schema whose strings also state what the server refuses in them: NUL
    (runs.catalog checks every string of the params with the one text check)."""
    if isinstance(schema, list):
        return [_storable(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy = {key: _storable(value) for key, value in schema.items()}
    if copy.get("type") == "string" and "pattern" not in copy:
        copy["pattern"] = NO_NUL
    return copy


def _run_body(catalog: Any, generated: dict[str, Any]) -> dict[str, Any]:
    """The run body as the catalog has it: per job, a manual run (no event fields) and an event run
    (``trigger: "event"`` with its ``event_key``, optionally ``debounce_seconds``), each with the
    job's params schema; the event fields' schemas are the generated body's."""
    props = generated.get("properties", {})

    def not_null(schema: dict[str, Any]) -> dict[str, Any]:
        branches = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
        return branches[0] if len(branches) == 1 else {"anyOf": branches}

    def alternative(name: str, job: Any, *, event: bool) -> dict[str, Any]:
        params_required = not _accepts_no_params(job)
        if event:
            fields = {
                "trigger": {"const": "event"},
                "event_key": not_null(props["event_key"]),
                "debounce_seconds": props["debounce_seconds"],
            }
            required = ["job", "trigger", "event_key"]
        else:
            fields = {
                "trigger": {"const": "manual"},
                "event_key": {"type": "null"},
                "debounce_seconds": {"type": "null"},
            }
            required = ["job"]
        return {
            "type": "object",
            "title": f"{name} ({'event' if event else 'manual'})",
            "description": job.description or f"A run of {name}.",
            "properties": {"job": {"const": name}, "params": _storable(dict(job.params_schema)), **fields},
            "required": required + (["params"] if params_required else []),
            "additionalProperties": False,
        }

    return {
        "title": "RunBody",
        "description": "A run of one catalog job (JOB_CATALOG_PATH) with the params its schema accepts:"
        " manual, or an event run (one run per job, event key and window).",
        "oneOf": [
            alternative(name, job, event=event)
            for name, job in sorted(catalog.jobs.items())
            for event in (False, True)
        ],
    }


def install_openapi(app: FastAPI, *, catalog: Callable[[], Any]) -> None:
    """Document every route's error statuses; build the document once, the run body from ``catalog``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            schemas = schema.get("components", {}).get("schemas", {})
            if "RunBody" in schemas:
                schemas["RunBody"] = _run_body(catalog(), schemas["RunBody"])
            document_error_statuses(schema, route_rules(app))
            _close_pattern_objects(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def also_200(description: str) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entry of a 200 a 202 route also answers (a duplicate, nothing new enqueued)."""
    return {
        200: {"description": description, "content": {"application/json": {"schema": {"type": "object"}}}}
    }

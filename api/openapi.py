"""The OpenAPI document as the exact contract: every route's error statuses, the catalog's jobs.

Statuses every route of a kind can answer are derived here from each operation (its auth rule,
its body and its parameters), so no route can forget one; a route adds its own (409, 502, ...)
with ``responses=error_responses(...)`` on its decorator. Every error status has ErrorAnswer as
its body. The run body's ``job`` and ``params``
are the catalog's: one alternative per job, its params schema as the catalog declares it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import Match

from api.auth import RULES, Need
from api.errors import ERROR_STATUSES, ErrorAnswer, FieldProblem
from api.middleware import JSON_API_PREFIX

REF = "#/components/schemas/{model}"

#: Statuses of a route that needs a key: no or a bad key, a narrow scope, PostgreSQL down (the key lookup).
KEYED = (401, 403, 503)
#: Statuses of a route with a JSON body: not JSON, too large, not of JSON's type, a refused field.
BODY = (400, 413, 415, 422)


def _statuses(method: str, path: str, operation: dict[str, Any]) -> set[int]:
    """The error statuses an operation answers by its kind: its auth rule, body and parameters."""
    statuses: set[int] = set()
    if RULES.get((method.upper(), path)) in (Need.READ, Need.TRIGGER, Need.OPERATOR, Need.METRICS):
        statuses.update(KEYED)
    if "requestBody" in operation and path.startswith(JSON_API_PREFIX):
        statuses.update(BODY)
    places = {p.get("in") for p in operation.get("parameters", [])}
    if "path" in places:
        statuses.update((404, 422))
    if "query" in places:
        statuses.add(422)
    return statuses


def document_error_statuses(schema: dict[str, Any]) -> None:
    """Give every operation of ``schema`` the error statuses its kind answers, each an ErrorAnswer.

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
                _statuses(method, path, operation) | {int(s) for s in responses if s.isdigit()}
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
    from fastapi.routing import iter_route_contexts

    methods: set[str] = set()
    for context in iter_route_contexts(app.routes):
        match, _ = context.matches(scope)
        if match in (Match.FULL, Match.PARTIAL):
            methods.update(context.methods or ())
    return sorted(methods)


def _accepts_no_params(job: Any) -> bool:
    """True when the job's params schema accepts ``{}`` (the body may then leave params out)."""
    import jsonschema

    return jsonschema.Draft202012Validator(dict(job.params_schema)).is_valid({})


def _run_body(catalog: Any, generated: dict[str, Any]) -> dict[str, Any]:
    """The run body as the catalog has it: one alternative per job with that job's params schema
    (and the generated body's other fields: the trigger and its event key and window)."""
    others = {k: v for k, v in generated.get("properties", {}).items() if k not in ("job", "params")}
    return {
        "title": "RunBody",
        "description": "A run of one catalog job (JOB_CATALOG_PATH) with the params its schema accepts.",
        "oneOf": [
            {
                "type": "object",
                "title": name,
                "description": job.description or f"A run of {name}.",
                "properties": {"job": {"const": name}, "params": dict(job.params_schema), **others},
                "required": ["job"] if _accepts_no_params(job) else ["job", "params"],
                "additionalProperties": False,
            }
            for name, job in sorted(catalog.jobs.items())
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
            document_error_statuses(schema)
            _close_pattern_objects(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def also_200(description: str) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` entry of a 200 a 202 route also answers (a duplicate, nothing new enqueued)."""
    return {
        200: {"description": description, "content": {"application/json": {"schema": {"type": "object"}}}}
    }

"""What each key can reach: the tables of docs/api.md and docs/console.md, generated from the declarations
the checks use (each API route's ``requires`` and api.auth.COVERS; each console route's session
dependency). tests/api/test_reach_docs.py fails when a document's table differs from these.
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import iter_route_contexts

from api.auth import COVERS, Need, route_rules
from api.console import web
from api.keys import Scope

#: The scopes in the tables' column order.
SCOPES = (Scope.READ, Scope.TRIGGER, Scope.OPERATOR, Scope.ADMIN)

#: Each console session dependency and the scopes whose session passes it (a trigger key opens none).
CONSOLE_NEEDS: dict[Any, frozenset[Scope]] = {
    web.page_session: frozenset({Scope.READ, Scope.OPERATOR, Scope.ADMIN}),
    web.stream_session: frozenset({Scope.READ, Scope.OPERATOR, Scope.ADMIN}),
    web.post_session: frozenset({Scope.READ, Scope.OPERATOR, Scope.ADMIN}),
    web.operator_session: frozenset({Scope.OPERATOR, Scope.ADMIN}),
    web.admin_page_session: frozenset({Scope.ADMIN}),
    web.admin_session: frozenset({Scope.ADMIN}),
}


def _mark(ok: bool) -> str:
    return "yes" if ok else "-"


#: Paths of the API besides ``/v1/`` (everything else the application serves is the console's).
API_PATHS = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/asyncapi.json", "/asyncapi.yaml")


def is_api_path(path: str) -> bool:
    """Whether ``path`` is the API's (``/v1/``, its documents, health, metrics), not the console's."""
    return path.startswith("/v1/") or path in API_PATHS


def api_reach_table(app: Any) -> str:
    """| route | read | trigger | operator | admin | of every API route (``/v1/``, health, metrics)."""
    lines = ["| route | read | trigger | operator | admin |", "|---|---|---|---|---|"]
    for (method, path), need in sorted(route_rules(app).items(), key=lambda item: (item[0][1], item[0][0])):
        if need in (None, Need.CONSOLE) or method == "HEAD" or not is_api_path(path):
            continue
        if need in (Need.PUBLIC, Need.METRICS):
            marks = ["yes (no key)"] * len(SCOPES)
        else:
            marks = [_mark(need in COVERS[scope]) for scope in SCOPES]
        lines.append(f"| `{method} {path}` | " + " | ".join(marks) + " |")
    return "\n".join(lines) + "\n"


def _console_scopes(route: Any) -> frozenset[Scope] | None:
    """The scopes whose session may use console ``route`` (None: not a console route)."""
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return None
    stack = list(dependant.dependencies)
    while stack:
        dep = stack.pop()
        if dep.call in CONSOLE_NEEDS:
            return CONSOLE_NEEDS[dep.call]
        stack.extend(dep.dependencies)
    return None


def console_reach_table(app: Any) -> str:
    """| page or form | read | operator | admin | of every console route (trigger keys open no session)."""

    lines = ["| page or form | read | operator | admin |", "|---|---|---|---|"]
    rows: set[tuple[str, str, str]] = set()
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        path = context.path or getattr(route, "path", None)
        if path is None or is_api_path(path):
            continue
        scopes = _console_scopes(route)
        for method in getattr(route, "methods", None) or ():
            if method == "HEAD":
                continue
            if scopes is None:
                marks = ["yes (no session)"] * 3
            else:
                marks = [_mark(s in scopes) for s in SCOPES if s is not Scope.TRIGGER]
            rows.add((path, method, " | ".join(marks)))
    for path, method, marks in sorted(rows):
        lines.append(f"| `{method} {path}` | {marks} |")
    return "\n".join(lines) + "\n"

"""/v1/runs: publish a catalog job (Jobs API), list and show runs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from api.auth import COVERS, Need, limited_key, requires
from api.errors import error_responses
from api.headers import audit_of, ctx_of
from api.openapi import also_200
from api.schemas import PathId, QueryId, RunBody
from config.errors import Forbidden
from config.public_text import public_text
from lifecycle.match_admin import under_data_dir
from models.run_log import RunStatus, Trigger
from runs.publish import get_run, masked_run, publish_run, recent_runs, run_dict, run_not_found

router = APIRouter(prefix="/v1/runs", tags=["runs"])


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in data.items()}


def _readable(request: Request, run: dict[str, Any]) -> dict[str, Any]:
    """``run`` as the request's key may read it: its stored failure (reason, error) without addresses
    or paths (config.public_text), its log file relative to DATA_DIR (its name when elsewhere); its
    params whole for an admin key, else masked (masked_run)."""
    key = getattr(request.state, "api_key", None)
    data_dir = ctx_of(request).settings.data_dir
    run = {
        **run,
        "reason": public_text(run["reason"]),
        "error": public_text(run["error"]),
        "log_path": run["log_path"] and under_data_dir(run["log_path"], data_dir=data_dir),
    }
    return run if key is not None and Need.ADMIN in COVERS[key.scope] else masked_run(run)


@router.post(
    "",
    dependencies=[requires(Need.TRIGGER)],
    status_code=202,
    responses={
        **also_200("A duplicate: the run of that key, nothing published."),
        **error_responses(403, 409),
    },
)
def publish(body: RunBody, request: Request) -> JSONResponse:
    """Publish a run of catalog job ``job`` (trigger ``manual``, or ``event`` with ``event_key``);
    200 with ``duplicate`` and the existing run's id for a used key (an event of that key in
    that window). A job of operator scope (the catalog's ``scope``) needs an operator or admin key."""
    ctx = ctx_of(request)
    job = ctx.catalog.job(body.job)
    key = getattr(request.state, "api_key", None)
    if key is not None and Need(job.scope.value) not in COVERS[key.scope]:
        raise Forbidden(f"a {key.scope.value} key may not publish job {job.name} (needs {job.scope.value})")
    result = publish_run(
        body.job,
        body.params,
        trigger=Trigger(body.trigger),
        catalog=ctx.catalog,
        publisher=ctx.publisher(),
        event_key=body.event_key,
        debounce_seconds=body.debounce_seconds,
        audit=audit_of(request),
    )
    return JSONResponse(result.to_dict(), status_code=200 if result.status == "duplicate" else 202)


@router.get("", dependencies=[requires(Need.READ)])
def list_runs(
    request: Request,
    job: QueryId = None,
    status: RunStatus | None = None,
    limit: int = Query(50, ge=1, le=10_000),
) -> dict[str, Any]:
    """Recent runs, newest first (as `kickoff runs list --json`); a key limited to leagues sees only the
    runs it published (runs belong to no league)."""
    found = recent_runs(job=job, status=None if status is None else status.value, limit=limit)
    runs = [_readable(request, _jsonable(run_dict(r))) for r in found]
    limited = limited_key(request)
    if limited is not None:
        runs = [r for r in runs if r.get("created_by_key_id") == limited.id]
    return {"count": len(runs), "runs": runs}


@router.get("/{run_id}", dependencies=[requires(Need.READ)])
def show_run(run_id: PathId, request: Request) -> dict[str, Any]:
    """One run (404 if unknown, or, for a key limited to leagues, published by another key); URLs in its
    params, reason and error masked for every key but an admin one."""
    run = _readable(request, _jsonable(run_dict(get_run(run_id))))
    limited = limited_key(request)
    if limited is not None and run.get("created_by_key_id") != limited.id:
        raise run_not_found(run_id)
    return run

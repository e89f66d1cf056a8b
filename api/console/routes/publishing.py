"""Publishing pages: the outbox (Retry of dead rows), an action by tracking id, job runs and "Run a job"."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from api.auth import Need, requires
from api.console.web import OperatorSession, PageSession, act, render, session_audit, wants_json, with_notice
from api.errors import status_of
from api.headers import ctx_of
from config.assignments import split_assignment
from config.errors import KickoffError, NotFound
from config.settings import mask_urls_in
from models.run_log import RunStatus, Trigger
from publisher.outbox import outbox_report, retry_dead
from publisher.results import action_state
from runs.admin import cancel_run, retry_run, run_log_tail
from runs.errors import InvalidRunParams, RunError
from runs.publish import get_run, masked_run, publish_run, recent_runs, run_dict

#: Every page and action here checks the console session itself (api.console.web).
router = APIRouter(include_in_schema=False, dependencies=[requires(Need.CONSOLE)])


@router.get("/outbox")
def outbox_page(request: Request, session: PageSession) -> Response:
    """Backlog, oldest pending age, pending rows (attempts, next attempt, last error), dead rows."""
    report = outbox_report(pending_limit=50, dead_limit=100)
    return render(request, "outbox.html", r=report, here="/outbox")


@router.post("/outbox/{row_id}/retry")
async def outbox_retry(row_id: int, request: Request, session: OperatorSession) -> Response:
    """Retry one dead row (as `kickoff outbox retry-dead ROW_ID`): pending again with a fresh budget."""

    def call() -> str:
        done = retry_dead(ids=[row_id], audit=session_audit(request, session))
        if done.rows:
            return f"row {row_id} pending again ({done.actions} action queued again)"
        if done.superseded:
            return f"row {row_id} left dead: a newer action holds its key"
        raise NotFound(f"no dead outbox row {row_id}")

    return await act(request, call, back="/outbox")


@router.get("/actions")
def action_page(request: Request, session: PageSession, tracking_id: str = "") -> Response:
    """An action by tracking id: its delivery (outbox message) and verification state."""
    state: dict[str, Any] | None = None
    error = None
    if tracking_id.strip():
        try:
            state = action_state(tracking_id.strip())
        except NotFound as exc:
            error = str(exc)
    return render(
        request,
        "action.html",
        status_code=404 if error else 200,
        tracking_id=tracking_id.strip(),
        a=state,
        error=error,
    )


@router.get("/runs")
def runs_page(request: Request, session: PageSession, status: str = "", job: str = "") -> Response:
    """Job runs, newest first, filtered by status and job."""
    wanted = status if status in {s.value for s in RunStatus} else ""
    runs = [run_dict(r) for r in recent_runs(job=job or None, status=wanted or None, limit=100)]
    runs = runs if session.is_admin else [masked_run(r) for r in runs]
    jobs = sorted(ctx_of(request).catalog.jobs)
    return render(
        request,
        "runs.html",
        runs=runs,
        statuses=[s.value for s in RunStatus],
        status=wanted,
        job=job,
        jobs=jobs,
        here=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
    )


@router.get("/runs/new")
def run_job_form(request: Request, session: PageSession, job: str = "") -> Response:
    """ "Run a job": pick a catalog job; its form is generated from the job's JSON Schema parameters."""
    catalog = ctx_of(request).catalog
    chosen = catalog.jobs.get(job)
    fields = param_fields(chosen.params_schema) if chosen is not None else []
    return render(request, "run_new.html", jobs=catalog.jobs, job=chosen, fields=fields)


@router.post("/runs")
async def run_job(request: Request, session: OperatorSession) -> Response:
    """Publish a run of a catalog job (trigger ``manual``, as POST /v1/runs and `kickoff runs publish`)."""
    ctx = ctx_of(request)
    form = await request.form()
    name = str(form.get("job", ""))

    def call() -> tuple[str, str]:
        job = ctx.catalog.jobs.get(name)
        params = params_from_form(job.params_schema if job else {}, form)
        result = publish_run(
            name,
            params,
            trigger=Trigger.MANUAL,
            catalog=ctx.catalog,
            publisher=ctx.publisher(),
            audit=session_audit(request, session),
        )
        data = result.to_dict()
        return str(data["run_id"]), f"run {data['run_id']} of {name}: {data['status']}"

    try:
        run_id, message = await run_in_threadpool(call)
    except KickoffError as exc:
        if wants_json(request):
            return JSONResponse({"ok": False, "message": str(exc)}, status_code=status_of(exc))
        return RedirectResponse(with_notice(f"/runs/new?job={name}", str(exc), ok=False), status_code=303)
    location = f"/runs/{run_id}"
    if wants_json(request):
        return JSONResponse({"ok": True, "message": message, "location": location})
    return RedirectResponse(with_notice(location, message, ok=True), status_code=303)


@router.get("/runs/{run_id}")
def run_page(run_id: str, request: Request, session: PageSession) -> Response:
    """One run with the tail of its current attempt's log, and Retry / Cancel; URLs in its params,
    reason, error and log masked for every session but an admin one."""
    run = run_dict(get_run(run_id))
    try:
        _run, tail = run_log_tail(run_id, lines=60)
        log_note = None
    except RunError as exc:
        tail, log_note = [], str(exc)
    if not session.is_admin:  # URLs a caller chose or a job printed: masked but for an admin
        run, tail = masked_run(run), [mask_urls_in(line) for line in tail]
    return render(request, "run.html", run=run, tail=tail, log_note=log_note, here=f"/runs/{run['run_id']}")


@router.post("/runs/{run_id}/retry")
async def run_retry(run_id: str, request: Request, session: OperatorSession) -> Response:
    """Retry a failed or skipped run (as `kickoff runs retry`)."""
    ctx = ctx_of(request)

    def call() -> str:
        answer = retry_run(run_id, publisher=ctx.publisher(), audit=session_audit(request, session)).as_dict()
        return f"attempt {answer['attempt']} of run {run_id}: {answer['status']}"

    return await act(request, call, back=f"/runs/{run_id}")


@router.post("/runs/{run_id}/cancel")
async def run_cancel(run_id: str, request: Request, session: OperatorSession) -> Response:
    """Cancel a queued run (as `kickoff runs cancel`): it ends skipped."""

    def call() -> str:
        run = cancel_run(run_id, audit=session_audit(request, session))
        return f"run {run.id} {run.status} ({run.reason or 'cancelled'})"

    return await act(request, call, back=f"/runs/{run_id}")


# -- "Run a job": a form from the job's JSON Schema ------------------------------------------------

_INPUT_TYPES = {"integer": "number", "number": "number", "boolean": "checkbox"}


def param_fields(schema: Any) -> list[dict[str, Any]]:
    """One form field per property of the job's params schema (type, required, bounds, description).

    Properties that are not a plain string, number, integer or boolean get a JSON text field.
    """
    props = dict(schema.get("properties", {}))
    required = set(schema.get("required", []))
    fields = []
    for name, spec in props.items():
        kind = spec.get("type") if isinstance(spec.get("type"), str) else "json"
        if "enum" in spec:
            kind = "enum"
        fields.append(
            {
                "name": name,
                "kind": kind if kind in {"string", "integer", "number", "boolean", "enum"} else "json",
                "input": _INPUT_TYPES.get(kind, "text"),
                "required": name in required,
                "minimum": spec.get("minimum"),
                "maximum": spec.get("maximum"),
                "step": "1" if kind == "integer" else "any",
                "enum": spec.get("enum", []),
                "description": spec.get("description", ""),
            }
        )
    return fields


def params_from_form(schema: Any, form: Any) -> dict[str, Any]:
    """The run's params from the generated form; empty fields are left out (the schema then decides)."""
    params: dict[str, Any] = {}
    for f in param_fields(schema):
        name = f"param.{f['name']}"
        if f["kind"] == "boolean":
            if form.get(name) is not None:
                params[f["name"]] = True
            continue
        raw = form.get(name)
        if raw is None or str(raw).strip() == "":
            continue
        raw = str(raw).strip()
        if f["kind"] in {"integer", "number", "json"}:
            parsed = split_assignment(f"v={raw}")
            value = parsed[1] if parsed else raw
            if f["kind"] == "json" and isinstance(value, str):
                try:
                    value = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise InvalidRunParams(f"params ({f['name']}): not JSON: {raw!r}") from exc
            params[f["name"]] = value
        else:
            params[f["name"]] = raw
    return params

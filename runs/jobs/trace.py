"""What every example job shares: its params from RUN_PARAMS and an optional start/end trace file."""

from __future__ import annotations

import json
import os
import time
from typing import Any

STARTED = time.time()


def params() -> dict[str, Any]:
    """The run's params (RUN_PARAMS, a JSON object set by the launcher); empty when unset."""
    return json.loads(os.environ.get("RUN_PARAMS") or "{}")


def write_trace(run_params: dict[str, Any], **extra: Any) -> None:
    """Write ``<trace_dir>/<RUN_ID>.<RUN_ATTEMPT>.json`` with this process's start and end times."""
    trace_dir = run_params.get("trace_dir")
    if not trace_dir:
        return
    record = {
        "run_id": os.environ.get("RUN_ID"),
        "attempt": os.environ.get("RUN_ATTEMPT"),
        "trigger": os.environ.get("RUN_TRIGGER"),
        "parent_id": os.environ.get("RUN_PARENT_ID"),
        "job_name": os.environ.get("JOB_NAME"),
        "traceparent": os.environ.get("TRACEPARENT"),  # the launcher's span of the run
        "pid": os.getpid(),
        "start": STARTED,
        "end": time.time(),
        **extra,
    }
    name = f"{record['run_id']}.{record['attempt']}.json"
    tmp = os.path.join(trace_dir, f".{name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, os.path.join(trace_dir, name))

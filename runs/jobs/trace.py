"""What every example job shares: its params from RUN_PARAMS and an optional start/end trace file.

The trace file goes to RUN_TRACE_DIR, a directory of the launcher's environment (set by whoever
runs the launcher): a run's params never choose where a job writes.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

STARTED = time.time()

#: The environment variable naming the directory of trace files (unset: no trace).
TRACE_DIR_ENV = "RUN_TRACE_DIR"


def params() -> dict[str, Any]:
    """The run's params (RUN_PARAMS, a JSON object set by the launcher); empty when unset."""
    return json.loads(os.environ.get("RUN_PARAMS") or "{}")


def write_trace(run_params: dict[str, Any], **extra: Any) -> None:
    """Write ``$RUN_TRACE_DIR/<RUN_ID>.<RUN_ATTEMPT>.json`` with this process's start and end times and
    ``run_params`` (nothing when RUN_TRACE_DIR is unset)."""
    trace_dir = os.environ.get(TRACE_DIR_ENV)
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
        "params": run_params,
        **extra,
    }
    name = f"{record['run_id']}.{record['attempt']}.json"
    tmp = os.path.join(trace_dir, f".{name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, os.path.join(trace_dir, name))

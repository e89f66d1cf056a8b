"""The errors of job runs: the job catalog, publish_run, the launcher and run_scope."""

from __future__ import annotations

from config.errors import ConfigurationError, ErrorKind, KickoffError, NotFound


class RunError(KickoffError):
    """Base class of the errors raised by the job catalog, publish_run, the launcher and run_scope."""

    kind = ErrorKind.FAILED


class CatalogError(RunError, ConfigurationError):
    """Raised when the job catalog (JOB_CATALOG_PATH) cannot be read or does not validate.

    The message names the file and the first problem found, so it prints as one line.
    """

    kind = ErrorKind.MISCONFIGURED


class UnknownJob(RunError, NotFound):
    """Raised when publish_run is asked for a job the catalog does not declare."""

    kind = ErrorKind.INVALID


class InvalidRunParams(RunError, ValueError):
    """Raised when a run's params do not match the job's parameter schema in the catalog."""

    kind = ErrorKind.INVALID


class InvalidTrigger(RunError, ValueError):
    """Raised when publish_run gets a trigger without what its dedupe key needs (slot, chain root, key),
    or an event key / debounce that is out of bounds; ``field`` names the request field when known."""

    kind = ErrorKind.INVALID

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class RunNotFound(RunError, NotFound):
    """Raised when no run_log row has the given run id (CLI, run_scope adopting RUN_ID)."""

    kind = ErrorKind.NOT_FOUND


class InvalidRunCommand(RunError, ValueError):
    """Raised when a job_runs delivery or run outbox payload is not a RunCommand the launcher can
    start (the launcher sets the delivery aside on job_runs.XQ; the drain marks the row dead).

    ``refusal`` names it for metrics: not_json, invalid or unknown_job (runs.command).
    """

    kind = ErrorKind.FAILED

    def __init__(self, message: str, *, refusal: str = "invalid") -> None:
        self.refusal = refusal
        super().__init__(message)

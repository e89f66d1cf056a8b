"""The event processing pipeline: what a listener runs on every event, and which one a match gets.

A pipeline is any class constructed as ``cls(match_id=..., settings=..., db_gate=...)`` (plus
``fence_token=...``, the run's fencing token of models.fence, when its constructor takes that
keyword) with a ``process(message)`` method taking the parsed envelope and a ``close()``. A match
gets its league's declared question pipeline (models.leagues; listener.pipelines), or the one the
``listener_pipeline`` setting names for every match; a league with no declaration is recorded only
(RecordOnlyPipeline), said once per process in the log. A message is recorded before it is
processed; a kill between the two leaves it past the match's processed watermark (models.processed)
and the next run processes it at its start. A pipeline whose ``process_batch(messages, *, through)``
moves the watermark in its own writes' transaction (listener.pipelines) is exactly once in effect;
another one's batch may be processed again after a kill (the watermark moves after it).
"""

from __future__ import annotations

import inspect
import logging
import pkgutil
import threading
from typing import Any, Protocol

from config.errors import ConfigurationError
from config.settings import KickoffSettings
from listener.pipelines import AtBatPipeline
from models.leagues import declaration

logger = logging.getLogger(__name__)

#: The pipeline of a match whose league has no declaration.
RECORD_ONLY = "listener.pipeline:RecordOnlyPipeline"
#: The baseball pipeline under its former name.
QuestionPipeline = AtBatPipeline
_undeclared_said: set[str] = set()


class Pipeline(Protocol):
    """What the listener calls for every event."""

    def process(self, message: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def load_pipeline(
    dotted: str,
    *,
    match_id: str,
    settings: KickoffSettings,
    db_gate: threading.Semaphore,
    fence_token: int | None = None,
) -> Pipeline:
    """Instantiate the pipeline class at ``module:attr`` (or ``module.attr``).

    ``fence_token`` is passed to a class whose constructor takes it (or ``**kwargs``).
    """
    try:
        cls = pkgutil.resolve_name(dotted)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigurationError(f"listener_pipeline {dotted!r} cannot be imported: {exc}") from exc
    kwargs: dict[str, Any] = {"match_id": match_id, "settings": settings, "db_gate": db_gate}
    if _takes_fence_token(cls):
        kwargs["fence_token"] = fence_token
    return cls(**kwargs)


def _takes_fence_token(cls: Any) -> bool:
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "fence_token" or p.kind is p.VAR_KEYWORD for p in params)


def pipeline_for(setting: str, league: str, *, match_id: str = "") -> str:
    """The pipeline (``module:attr``) of a match of ``league``: ``setting`` (LISTENER_PIPELINE) when set, else
    the league's declared one, else RECORD_ONLY (said once per league and process)."""
    if setting:
        return setting
    decl = declaration(league)
    if decl is not None:
        return decl.pipeline
    if league not in _undeclared_said:
        _undeclared_said.add(league)
        logger.warning(
            "league %r has no declaration (models.leagues): match %s and the league's others are "
            "recorded only",
            league,
            match_id,
        )
    return RECORD_ONLY


class RecordOnlyPipeline:
    """A pipeline that does nothing (what ``listener_skip_processing`` amounts to)."""

    def __init__(self, **_: Any) -> None:
        pass

    def process(self, message: dict[str, Any]) -> None:
        return None

    def close(self) -> None:
        return None

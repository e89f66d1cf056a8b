"""The default event processing pipeline: issues and settles in-game Questions from push events.

A pipeline is any class named by the ``listener_pipeline`` setting, constructed as
``cls(match_id=..., settings=..., db_gate=...)`` (plus ``fence_token=...``, the run's fencing
token of models.fence, when its constructor takes that keyword) with a ``process(message)`` method taking the
parsed envelope and a ``close()``. QuestionPipeline issues one question per at-bat ("Will the
hitter get a hit?", key ``atbat:{event id}``) when the at-bat starts and settles it when an event
with the ``atbatover`` category arrives (the at-bat its ``atbat_id`` names, else the last one
opened live). Both are idempotent (a second insert of a key only sets its prompt again, the
settle touches only an open question, an at-bat whose end came before its start is created
settled), and the listener passes each distinct message once across all runs of a match (the
archive's index), so a backfill or a successor never issues or settles a question twice. A
message is recorded before it is processed: a kill between the two leaves that one message
unprocessed (at most once), never processed twice.
It touches PostgreSQL only on those two events, through a short connection held under the
process-wide gate, never for the whole game, each write checked against the run's fencing token
under the match row's share lock (models.fence: FencedWrite once a newer run of the match started).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import pkgutil
import threading
from typing import Any, Protocol

from config.clock import utcnow
from config.errors import ConfigurationError
from config.settings import KickoffSettings

logger = logging.getLogger(__name__)


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


class QuestionPipeline:
    """Issues an in-game question at each at-bat and settles it when the at-bat is over."""

    def __init__(
        self,
        *,
        match_id: str,
        settings: KickoffSettings,
        db_gate: threading.Semaphore,
        fence_token: int | None = None,
    ) -> None:
        self.match_id = match_id
        self.fence_token = fence_token
        self.settings = settings
        self.db_gate = db_gate
        self.open_key: str | None = None
        self.issued = 0
        self.settled = 0

    def process(self, message: dict[str, Any]) -> None:
        payload = message.get("payload")
        if not isinstance(payload, dict) or not self.match_id:
            return
        event = payload.get("event")
        if not isinstance(event, dict):
            return
        meta = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
        etype = event.get("type") or event.get("event_type")
        categories = str(meta.get("event_category") or event.get("event_category") or "").split(",")
        if etype == "atbat" and meta.get("operation", "create") == "create" and event.get("id"):
            # A recovered at-bat is an earlier one: the at-bat being played stays the one to settle.
            self._issue(event, current=not isinstance(message.get("kickoff"), dict))
        if "atbatover" in categories:
            # The pitch names its at-bat (atbat_id): a backfilled or taken-over at-bat settles the
            # right question; without one, the at-bat this run last opened.
            atbat = event.get("atbat_id")
            key = f"atbat:{atbat}" if isinstance(atbat, str) and atbat else self.open_key
            if key is not None:
                answer = "yes" if "hit" in categories else "no"
                self._settle(answer, event, key=key, may_precede=key != self.open_key)

    def _issue(self, event: dict[str, Any], *, current: bool = True) -> None:
        from models.boundary import connection
        from models.question import issue_question

        key = f"atbat:{event['id']}"
        hitter = (event.get("hitter") or {}).get("full_name") or "the hitter"
        with self.db_gate, connection(), self._fenced("question insert"):
            # An at-bat settled before its start arrived (a backfill brings the start after the
            # live stream brought its end) keeps its answer and gets its hitter's prompt.
            issue_question(
                self.match_id,
                key=key,
                prompt=f"Will {hitter} get a hit in this at-bat?",
                details={"event_id": event["id"]},
            )
        if current:
            self.open_key = key
        self.issued += 1

    def _settle(self, answer: str, event: dict[str, Any], *, key: str, may_precede: bool = False) -> None:
        """Settle the at-bat's open question; ``may_precede``: its start may not have arrived yet (the
        question is then created settled, and its start later only fills in the prompt)."""
        from models.boundary import connection
        from models.question import settle_question

        if key == self.open_key:
            self.open_key = None
        now = utcnow()
        with self.db_gate, connection(), self._fenced("question settle"):
            settle_question(
                self.match_id,
                key=key,
                answer=answer,
                at=now,
                may_precede=may_precede,
                prompt="Will the hitter get a hit in this at-bat?",
                details={"event_id": key.removeprefix("atbat:")},
            )
        self.settled += 1
        logger.debug(
            "match %s question %s settled %s by event %s", self.match_id, key, answer, event.get("id")
        )

    def _fenced(self, what: str) -> contextlib.AbstractContextManager[None]:
        from models.fence import fenced

        return fenced(self.match_id, self.fence_token, what=what)

    def close(self) -> None:
        logger.debug("match %s pipeline issued %d, settled %d", self.match_id, self.issued, self.settled)


class RecordOnlyPipeline:
    """A pipeline that does nothing (what ``listener_skip_processing`` amounts to)."""

    def __init__(self, **_: Any) -> None:
        pass

    def process(self, message: dict[str, Any]) -> None:
        return None

    def close(self) -> None:
        return None

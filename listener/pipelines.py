"""The question pipelines, one per league (models.leagues names each): a question per unit of play.

Each pipeline reads the push events of its sport (docs/adding-a-league.md says which provider
documents each follows and where srsim's events differ) and answers, per message, whether a unit
starts (``Opening``: the question is issued) and whether one ended (``Closing``: it is settled).
``UnitPipeline`` does the rest the same way for every league:

* issue and settle are idempotent and fenced (models.fence): a second issue of a key only sets its
  prompt again; a settle touches only an open question, and a unit whose end arrives before its
  start (a backfill's order) is created settled; the listener passes each distinct message once
  across all runs of a match (a successor replays only what lies past the match's processed
  watermark, which ``process_batch`` moves with its writes), so a backfill or a successor never
  issues or settles twice;
* a later version of the event that settled a question (a correction, ``operation: update``) with
  another outcome settles it again, and its delete opens it again, each recorded in the question's
  ``settlements`` (models.question);
* an event it cannot read (a missing unit id, an unknown outcome, a settle naming no unit while none
  is open) is set aside (config.set_aside: one log line, one count of
  ``kickoff_items_set_aside_total{loop="question pipeline"}``) and the stream goes on.

PostgreSQL is touched only on those events, through a short connection held under the process-wide
gate, never for the whole game. ``process_batch`` handles the messages of one committed batch of the
event log (listener.ingest) in order over one connection, in one fenced transaction: a busy stream
costs a transaction per batch, not per question (a batch PostgreSQL refuses as a whole is handled
again a message at a time). That transaction also advances the match's processed watermark
(models.processed) past the batch, so its writes and the record that they were made commit
together: a run that starts replays only what no committed processing covered, and no issue,
settle, re-settle or reopen is applied twice.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from config.clock import utcnow
from config.set_aside import set_aside
from config.settings import KickoffSettings

logger = logging.getLogger(__name__)

#: The loop's name where the pipelines set an event aside (config.set_aside).
LOOP = "question pipeline"


@dataclass(frozen=True)
class Opening:
    """A unit starts: issue its question."""

    key: str  # "<unit>:<the feed's unit id>"
    prompt: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Closing:
    """A unit ended: settle its question with ``answer`` (``key`` None: the unit this run last opened)."""

    key: str | None
    answer: str  # "yes" | "no"
    prompt: str  # the question's prompt should its start not have arrived yet
    event_id: str | None  # the event whose message settles it (a correction of it re-settles)
    details: dict[str, Any] = field(default_factory=dict)


class Unreadable(Exception):
    """An event a pipeline cannot read; ``kind`` names the problem (the set-aside count's label)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


class UnitPipeline:
    """Issues a question when a unit of play starts and settles it when the feed says how it ended."""

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
        self.resettled = 0
        self.reopened = 0
        self.set_aside = 0
        self._in_batch = False  # inside process_batch: writes are gathered, applied in one call
        self._ops: list[tuple[dict[str, Any], Callable[[Any], None]]] = []

    # -- what each league says -------------------------------------------------------------

    def read(
        self, event: dict[str, Any], meta: dict[str, Any], game: dict[str, Any]
    ) -> tuple[Opening | None, Closing | None]:
        """Whether ``event`` starts a unit and whether it ends one (Unreadable: it cannot be read)."""
        raise NotImplementedError

    # -- the same for every league ----------------------------------------------------------

    def process_batch(self, messages: list[dict[str, Any]], *, through: str | None = None) -> bool:
        """Process ``messages`` in order in one fenced transaction (FencedWrite: a newer run holds it).

        ``through``: the event log key of the last message. The match's processed watermark
        (models.processed) moves to its row in that same transaction, so a crash before the commit
        leaves these messages to the next run and nothing after it is processed twice. Returns True
        when the watermark moved; a batch that writes nothing opens no transaction (False).
        """
        from config.errors import DatabaseUnavailable
        from models.boundary import connection
        from models.db import database
        from models.errors import FencedWrite

        if len(messages) == 1 and through is None:
            self.process(messages[0])
            return False
        from models.processed import mark_processed
        from models.question import apply_question_ops

        state = self._state()
        self._in_batch, self._ops = True, []
        try:
            for message in messages:
                self.process(message)
        finally:
            self._in_batch = False
        ops, self._ops = self._ops, []
        if not ops:
            return False
        try:
            with self.db_gate, connection(), database.atomic(), self._fenced("question writes"):
                results = apply_question_ops(self.match_id, [op for op, _ in ops])
                if through is not None:
                    mark_processed(self.match_id, key=through, fence_token=self.fence_token)
        except (FencedWrite, DatabaseUnavailable):
            raise
        except Exception:
            logger.exception(
                "match %s: a batch of %d events failed; one at a time", self.match_id, len(messages)
            )
            self._restore(state)
            for message in messages:
                self.process(message)
            if through is None:
                return False
            with self._writing("processed watermark"):
                mark_processed(self.match_id, key=through, fence_token=self.fence_token)
            return True
        for (_, then), result in zip(ops, results, strict=True):
            then(result)
        return through is not None

    def _state(self) -> Any:
        """What ``process`` keeps in memory between messages (restored when a batch is rolled back)."""
        return self.open_key

    def _restore(self, state: Any) -> None:
        self.open_key = state

    def _writing(self, what: str) -> contextlib.AbstractContextManager[None]:
        """One write's connection and fence."""
        return _one_write(self.db_gate, self._fenced(what))

    def process(self, message: dict[str, Any]) -> None:
        payload = message.get("payload")
        if not isinstance(payload, dict) or not self.match_id:
            return
        event = payload.get("event")
        if not isinstance(event, dict):
            return
        meta = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
        game = payload.get("game") if isinstance(payload.get("game"), dict) else {}
        try:
            if meta.get("operation") == "delete":
                if isinstance(event.get("id"), str) and event["id"]:
                    self._reopen(event["id"])
                return
            try:
                opening, closing = self.read(event, meta, game)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise Unreadable("unreadable", f"{type(exc).__name__}: {exc}") from exc
            if opening is not None:
                # A recovered unit is an earlier one: the unit being played stays the one to settle.
                self._issue(opening, current=not isinstance(message.get("kickoff"), dict))
            if closing is not None:
                key = closing.key or self.open_key
                if key is None:
                    raise Unreadable("never opened", "a unit's end names no unit and none is open")
                self._settle(key, closing)
        except Unreadable as exc:
            self.set_aside += 1
            set_aside(
                LOOP,
                f"match {self.match_id} event {event.get('id')!r}",
                str(exc),
                kind=exc.kind,
                match_id=self.match_id,
            )

    def _issue(self, opening: Opening, *, current: bool) -> None:
        from models.question import issue_question

        if self._in_batch:
            op = {"op": "issue", "key": opening.key, "prompt": opening.prompt, "details": opening.details}
            self._ops.append((op, _ignore))
        else:
            with self._writing("question insert"):
                issue_question(self.match_id, key=opening.key, prompt=opening.prompt, details=opening.details)
        if current:
            self.open_key = opening.key
        self.issued += 1

    def _settle(self, key: str, closing: Closing) -> None:
        from models.question import settle_question

        if key == self.open_key:
            self.open_key = None
        at, details = utcnow(), {"event_id": key.partition(":")[2], **closing.details}
        if self._in_batch:
            op = {
                "op": "settle",
                "key": key,
                "answer": closing.answer,
                "at": at.isoformat(),
                "prompt": closing.prompt,
                "details": details,
                "event_id": closing.event_id,
            }
            self._ops.append((op, lambda done: self._settled(done, key, closing)))
            return
        with self._writing("question settle"):
            done = settle_question(
                self.match_id,
                key=key,
                answer=closing.answer,
                at=at,
                prompt=closing.prompt,
                details=details,
                event_id=closing.event_id,
            )
        self._settled(done, key, closing)

    def _settled(self, done: str | None, key: str, closing: Closing) -> None:
        from models.question import RESETTLED, SETTLED

        if done == SETTLED:
            self.settled += 1
        elif done == RESETTLED:
            self.resettled += 1
            logger.info(
                "match %s question %s settled again %s (event %s corrected)",
                self.match_id,
                key,
                closing.answer,
                closing.event_id,
            )

    def _reopen(self, event_id: str) -> None:
        from models.question import reopen_question

        if self._in_batch:
            op = {"op": "reopen", "event_id": event_id, "at": utcnow().isoformat()}
            self._ops.append((op, lambda key: self._reopened(key, event_id)))
            return
        with self._writing("question reopen"):
            key = reopen_question(self.match_id, event_id=event_id, at=utcnow())
        self._reopened(key, event_id)

    def _reopened(self, key: str | None, event_id: str) -> None:
        if key is not None:
            self.reopened += 1
            logger.info("match %s question %s open again (event %s deleted)", self.match_id, key, event_id)

    def _fenced(self, what: str) -> contextlib.AbstractContextManager[None]:
        from models.fence import fenced

        return fenced(self.match_id, self.fence_token, what=what)

    def close(self) -> None:
        logger.debug(
            "match %s pipeline issued %d, settled %d, settled again %d, reopened %d, set aside %d",
            self.match_id,
            self.issued,
            self.settled,
            self.resettled,
            self.reopened,
            self.set_aside,
        )


def _ignore(_: Any) -> None:
    return None


@contextlib.contextmanager
def _one_write(gate: threading.Semaphore, fence: contextlib.AbstractContextManager[None]) -> Iterator[None]:
    from models.boundary import connection

    with gate, connection(), fence:
        yield


def _unit_id(value: Any, unit: str) -> str:
    if not isinstance(value, str) or not value:
        raise Unreadable("missing unit id", f"the {unit} has no id")
    return value


def _type_of(event: dict[str, Any], meta: dict[str, Any]) -> Any:
    return event.get("type") or event.get("event_type") or meta.get("event_type")


class AtBatPipeline(UnitPipeline):
    """Baseball: "Will the hitter get a hit in this at-bat?" per at-bat.

    Issued on the ``atbat`` event (``operation: create``), settled by the pitch whose
    ``event_category`` has ``atbatover`` (a hit: ``hit`` in it too); the pitch names its at-bat
    (``atbat_id``), else it is the at-bat this run last opened.
    """

    def read(
        self, event: dict[str, Any], meta: dict[str, Any], game: dict[str, Any]
    ) -> tuple[Opening | None, Closing | None]:
        opening = closing = None
        categories = str(meta.get("event_category") or event.get("event_category") or "").split(",")
        if _type_of(event, meta) == "atbat" and meta.get("operation", "create") == "create":
            atbat = _unit_id(event.get("id"), "at-bat")
            hitter = (event.get("hitter") or {}).get("full_name") or "the hitter"
            prompt = f"Will {hitter} get a hit in this at-bat?"
            opening = Opening(f"atbat:{atbat}", prompt, {"event_id": atbat})
        if "atbatover" in categories:
            atbat = event.get("atbat_id")
            key = f"atbat:{atbat}" if isinstance(atbat, str) and atbat else None
            answer = "yes" if "hit" in categories else "no"
            closing = Closing(key, answer, "Will the hitter get a hit in this at-bat?", event.get("id"))
        return opening, closing


#: NFL drive end reasons (Sportradar's drive ``end_reason``) in which the offence scored.
DRIVE_POINTS = frozenset({"Touchdown", "Field Goal"})
#: ... and those in which it did not.
DRIVE_NO_POINTS = frozenset(
    {
        "Punt",
        "Interception",
        "Fumble",
        "Downs",
        "Turnover on Downs",
        "Missed FG",
        "Blocked FG",
        "Blocked Punt",
        "Safety",
        "End of Half",
        "End of Game",
        "Turnover",
    }
)


class DrivePipeline(UnitPipeline):
    """American football: "Will this drive end in points?" per drive.

    Issued on the ``drive`` event without an ``end_reason`` (the drive started), settled by the
    version of that event with one (Touchdown, Field Goal: yes; Punt, Interception, ...: no); a later
    version with another end reason (a review) settles it again.
    """

    def read(
        self, event: dict[str, Any], meta: dict[str, Any], game: dict[str, Any]
    ) -> tuple[Opening | None, Closing | None]:
        if _type_of(event, meta) != "drive":
            return None, None
        drive = _unit_id(event.get("id"), "drive")
        key, prompt = f"drive:{drive}", "Will this drive end in points?"
        reason = event.get("end_reason")
        if reason is None:
            return Opening(key, prompt, {"event_id": drive, "sequence": event.get("sequence")}), None
        if reason in DRIVE_POINTS:
            return None, Closing(key, "yes", prompt, drive, {"end_reason": reason})
        if reason in DRIVE_NO_POINTS:
            return None, Closing(key, "no", prompt, drive, {"end_reason": reason})
        raise Unreadable("unknown outcome", f"drive {drive} ended with an unknown end_reason {reason!r}")


class PeriodPipeline(UnitPipeline):
    """Hockey: "Will the home team lead after this period?" per period.

    Issued on the first event of a period (``event.period.id``; the provider sends no period-start
    event), settled by its ``endperiod`` event from the score it carries (``home_points``,
    ``away_points``: the home team ahead is yes, a tie or behind no).
    """

    unit = "period"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._opened: set[str] = set()

    def _state(self) -> Any:
        return self.open_key, set(self._opened)

    def _restore(self, state: Any) -> None:
        self.open_key, self._opened = state

    def read(
        self, event: dict[str, Any], meta: dict[str, Any], game: dict[str, Any]
    ) -> tuple[Opening | None, Closing | None]:
        period = event.get("period")
        etype = _type_of(event, meta)
        if period is None:
            if etype == "endperiod":
                raise Unreadable("missing unit id", f"an endperiod event names no {self.unit}")
            return None, None
        if not isinstance(period, dict):
            raise Unreadable("missing unit id", f"the event's {self.unit} is not an object")
        pid = _unit_id(period.get("id"), self.unit)
        key = f"{self.unit}:{pid}"
        home = (game.get("home") or {}).get("name") or "the home team"
        number = period.get("number")
        ordinal = f"{self.unit} {number}" if number is not None else f"this {self.unit}"
        if (period.get("type") or "").lower() == "overtime":
            ordinal = f"overtime {number}" if number is not None else "this overtime"
        prompt = f"Will {home} lead after {ordinal}?"
        opening = None
        if pid not in self._opened:
            self._opened.add(pid)
            opening = Opening(key, prompt, {"event_id": pid, "number": number})
        closing = None
        if etype == "endperiod":
            hp, ap = event.get("home_points"), event.get("away_points")
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in (hp, ap)):
                if opening is not None:
                    self._opened.discard(pid)  # its next event opens it
                raise Unreadable("unknown outcome", f"{key} ended without a score")
            closing = Closing(key, "yes" if hp > ap else "no", prompt, event.get("id"), {"score": [hp, ap]})
        return opening, closing


class QuarterPipeline(PeriodPipeline):
    """Basketball: "Will the home team lead after this quarter?" per quarter (and overtime), the same
    events as hockey's periods (``event.period``, ``endperiod`` with the score)."""

    unit = "quarter"

"""Sleeper ids where an ESPN id belongs: the trigger check against the players map (players.sync keeps it).

A numeric Sleeper id ("4046") turned into an integer passes the type checks of an ESPN id; the
players map knows it as a Sleeper id, so the triggers refuse it naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable

from models.player import sleeper_ids_among
from publisher.errors import TriggerValidationError


def sleeper_only_ids(ids: Iterable[int]) -> set[int]:
    """Of ``ids``, those the players map knows as Sleeper ids and not as any player's ESPN id."""
    wanted = sorted({int(i) for i in ids})
    if not wanted:
        return set()
    return sleeper_ids_among(wanted)


def sleeper_id_refusal(fields: dict[str, int | None], sleeper_ids: set[int]) -> TriggerValidationError | None:
    """The refusal naming the first field whose id is in ``sleeper_ids`` (``sleeper_only_ids``), if any.

    The ESPN routes take ESPN ids (integers); a numeric Sleeper id ("4046") turned into an
    integer would otherwise pass. Ids the map does not know are left to the consumer.
    """
    for name, pid in fields.items():
        if pid is not None and pid in sleeper_ids:
            return TriggerValidationError(
                name, f"{pid} is a Sleeper player id (players map); this route takes ESPN player ids"
            )
    return None

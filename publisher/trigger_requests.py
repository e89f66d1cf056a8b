"""Trigger requests: one pydantic model per trigger queue, used by the library, the API and the CLI.

Each model states its fields once, with the message contract's names, strict types, every bound
and a description: FastAPI validates a request body with it (so the OpenAPI schema is this
model), ``kickoff trigger`` builds its options from its fields (the description is the option's
--help) and the library's trigger functions take it. Unknown fields are refused and types are
strict (``false`` is no number and ``0`` no boolean).

The trigger functions check the values they are given once more and name the refused field
(``publisher.validation``): a request built with ``unchecked`` (the CLI, which passes what the
operator typed) is refused there with the same TriggerValidationError as any other.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, Self, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from typing_extensions import TypeAliasType

from config.clock import parse_iso8601
from publisher.errors import TriggerValidationError

#: Longest id (league, team, keys) and longest free text a body may carry.
MAX_ID_LENGTH = 200
MAX_TEXT_LENGTH = 2000
#: Largest integer a body may carry: the largest every JSON reader holds exactly (2**53 - 1).
MAX_INT = 2**53 - 1
#: Largest count of items in a list or object of a body.
MAX_ITEMS = 200

#: No NUL character (PostgreSQL stores none in text or jsonb).
NO_NUL = r"^[^\x00]*$"
#: At least one character that is not white space, and no NUL (the library's required text).
NON_BLANK = r"^[^\x00]*[^\s\x00][^\x00]*$"


def _not_all_zero_hex(width: int) -> str:
    """A regex of ``width`` lowercase hex digits that are not all zeros (no look-ahead needed)."""
    return "(?:" + "|".join(f"0{{{i}}}[1-9a-f][0-9a-f]{{{width - 1 - i}}}" for i in range(width)) + ")"


#: A W3C version-00 traceparent whose trace id and span id are not all zeros.
TRACEPARENT = f"^00-{_not_all_zero_hex(32)}-{_not_all_zero_hex(16)}-[0-9a-f]{{2}}$"
#: A UUID as the library reads it back (canonical lowercase form).
UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


def _integral(value: Any) -> Any:
    """JSON's integers include ``1.0``: a float with no fraction is read as that integer."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: Read an integer as JSON Schema has it (``1.0`` is one), strict otherwise (``false``, ``"1"`` are not).
INTEGRAL = BeforeValidator(_integral)

Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH, pattern=NON_BLANK)]
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_LENGTH, pattern=NO_NUL)]
#: A key of a JSON object in a body (the schema states a key's pattern, not its length).
JsonKey = Annotated[str, StringConstraints(pattern=NO_NUL)]
EspnId = Annotated[
    int, Field(ge=1, le=MAX_INT, description="An ESPN player id (a positive integer)."), INTEGRAL
]
Traceparent = Annotated[str, StringConstraints(pattern=TRACEPARENT)]
TrackingId = Annotated[str, StringConstraints(pattern=UUID_PATTERN)]
PositiveInt = Annotated[int, Field(ge=1, le=MAX_INT), INTEGRAL]
BoundedInt = Annotated[int, Field(ge=-MAX_INT, le=MAX_INT), INTEGRAL]
BoundedFloat = Annotated[float, Field(ge=-1e15, le=1e15)]
#: Any JSON value whose strings hold no NUL, its numbers bounded (decision inputs, result details).
JsonValue = TypeAliasType(
    "JsonValue",
    Union[Text, BoundedInt, BoundedFloat, bool, list["JsonValue"], dict[JsonKey, "JsonValue"], None],  # noqa: UP007
)
JsonObject = Annotated[dict[JsonKey, JsonValue], Field(max_length=MAX_ITEMS)]


def aware_time(value: str) -> datetime:
    """An RFC 3339 date-time with an offset (lower-case ``t``/``z`` read as upper-case)."""
    parsed = datetime.fromisoformat(value.upper())
    if parsed.tzinfo is None:
        raise ValueError("a time with an offset (e.g. 2024-08-30T19:02:00Z) is required")
    return parsed


def _iso_text(value: Any) -> Any:
    """A ``datetime`` given in Python is read as its ISO text (JSON never carries one)."""
    return value.isoformat() if isinstance(value, datetime) else value


Time = Annotated[
    str,
    StringConstraints(max_length=64),
    BeforeValidator(_iso_text),
    AfterValidator(aware_time),
    Field(json_schema_extra={"format": "date-time"}),
]


@dataclass(frozen=True)
class CliOption:
    """How ``kickoff trigger`` spells a field (metadata of the field's annotation; pydantic ignores it).

    ``flag`` is the option (default: ``--`` and the field name with dashes), ``type`` the type
    the option reads (``int``; default text), ``parse`` turns the text into the field's value
    (default: the text as it is, refused by the trigger naming the field; a ValueError is a
    usage error), ``syntax`` the metavar, ``multiple`` a repeatable option (a list field).
    """

    flag: str | None = None
    _: KW_ONLY
    type: Any = None
    parse: Any = None
    syntax: str | None = None
    multiple: bool = False


def player_id_of(text: str) -> Any:
    """An integer (ESPN id) when ``text`` parses as one; otherwise the text, which the trigger refuses."""
    try:
        return int(text)
    except ValueError:
        return text


def time_of(text: str) -> datetime:
    """An ISO 8601 time with an offset (InvalidTimeError: the request is invalid)."""
    return parse_iso8601(text, what="--expires-at")


def swap_of(text: str) -> dict[str, Any]:
    """``PLAYER_ID:SLOT[:KIND]`` as a swap (ValueError for another shape)."""
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"expected PLAYER_ID:SLOT[:ir], got {text!r}")
    swap: dict[str, Any] = {"player_id": player_id_of(parts[0]), "to_slot": parts[1]}
    if len(parts) == 3:
        swap["kind"] = parts[2]
    return swap


class Body(BaseModel):
    """A request body: unknown fields are an error and types are strict (no coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class DecisionInputs(Body):
    """What the caller decided with; ``season`` and ``week`` (both set) scope the idempotency key."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"propertyNames": {"pattern": NO_NUL}})
    __pydantic_extra__: dict[JsonKey, JsonValue] = Field(init=False)  # type: ignore[assignment]

    season: PositiveInt | None = None
    week: PositiveInt | None = None


class Swap(Body):
    player_id: EspnId
    to_slot: Id = Field(description="Target slot, e.g. QB, BE, IR.")
    kind: Literal["ir", "lineup"] | None = Field(
        None, description="`ir` marks an IR move a waiver claim can chain behind."
    )


def _plain(value: Any) -> Any:
    """``value`` with every model in it as a plain dict (its unset optional fields left out)."""
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_none=True)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class TriggerRequest(Body):
    """What every trigger request carries besides its own fields (``COMMON_FIELDS``)."""

    league_id: Annotated[Id, CliOption("--league")] = Field(description="Fantasy league id.")
    team_id: Annotated[Id, CliOption("--team")] = Field(description="Team id in the league.")
    idempotency_key: Id | None = Field(
        None, description="Idempotency key: a repeat with it while it is held answers duplicate."
    )
    decision_inputs: DecisionInputs = Field(default_factory=DecisionInputs)
    traceparent: Traceparent | None = Field(None, description="W3C traceparent (default: the header).")

    @classmethod
    def unchecked(cls, **values: Any) -> Self:
        """The request with ``values`` as given (no validation; the trigger checks them and names a
        refused field), its other fields at their defaults."""
        return cls.model_construct(**values)

    def value(self, name: str) -> Any:
        """Field ``name`` as the library reads it: nested models as plain dicts."""
        return _plain(getattr(self, name))

    def checked(self) -> Self:
        """This request validated by its model (built ``unchecked`` or not); a refusal is a
        TriggerValidationError naming the first refused field (``swaps[0].player_id``)."""
        values = {name: self.value(name) for name in type(self).model_fields}
        try:
            return type(self).model_validate(values)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise TriggerValidationError(field_path(error["loc"]), str(error["msg"])) from None

    @classmethod
    def own_fields(cls) -> tuple[str, ...]:
        """The fields of this queue's request, without the common ones."""
        return tuple(name for name in cls.model_fields if name not in COMMON_FIELDS)


def field_path(loc: tuple[Any, ...]) -> str:
    """A validation error's location as the library names fields: ``swaps[0].player_id``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


#: The fields every trigger request has.
COMMON_FIELDS = frozenset(TriggerRequest.model_fields)


class LineupRequest(TriggerRequest):
    """A lineup change: swaps carry ESPN player ids; a swap ``kind`` of ``ir`` marks an IR move."""

    swaps: Annotated[
        list[Swap], CliOption("--swap", parse=swap_of, syntax="PLAYER_ID:SLOT[:ir]", multiple=True)
    ] = Field(
        min_length=1,
        max_length=MAX_ITEMS,
        description="The moves: ESPN player id and target slot; kind `ir` marks an IR move.",
    )


class WaiverRequest(TriggerRequest):
    """A waiver claim; a claim chained behind an IR move (``after_tracking_id``) drops no one."""

    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"properties": {"after_tracking_id": {"type": "null"}}},
                {"properties": {"drop_player_id": {"type": "null"}}},
            ]
        }
    )

    add_player_id: Annotated[EspnId, CliOption("--add", parse=player_id_of)] = Field(
        description="ESPN id of the player to claim."
    )
    drop_player_id: Annotated[EspnId | None, CliOption("--drop", parse=player_id_of)] = Field(
        None, description="ESPN id of the player to drop."
    )
    bid: Annotated[Annotated[int, Field(ge=0, le=MAX_INT), INTEGRAL] | None, CliOption(type=int)] = Field(
        None, description="FAAB bid."
    )
    after_tracking_id: Annotated[TrackingId | None, CliOption("--after")] = Field(
        None, description="Tracking id of the IR move to wait for (then drop no one)."
    )


class DraftPickRequest(TriggerRequest):
    """A draft target: the ESPN player to take at ``pick_number``, until ``expires_at``."""

    pick_number: Annotated[PositiveInt, CliOption("--pick", type=int)] = Field(
        description="Overall pick number."
    )
    espn_id: Annotated[EspnId, CliOption(parse=player_id_of)] = Field(
        description="ESPN id of the player to draft."
    )
    expires_at: Annotated[Time | None, CliOption(parse=time_of)] = Field(
        None, description="ISO 8601 time with an offset when the pick's clock runs out."
    )


def cli_option(request: type[TriggerRequest], name: str) -> CliOption:
    """How ``kickoff trigger`` spells field ``name`` of ``request`` (its CliOption, else the default)."""
    found = next((m for m in request.model_fields[name].metadata if isinstance(m, CliOption)), None)
    return found or CliOption()

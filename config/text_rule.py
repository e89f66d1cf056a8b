"""The one rule of operator text on every surface: storable (no NUL, no lone surrogate, UTF-8), bounded.

The API's request models hold every body text to it (publisher.trigger_requests: NO_NUL, the
lone-surrogate check of config.feed_text, MAX_TEXT_LENGTH); the CLI's ``--reason`` (cli.common),
the console's reason fields (api.console.routes) and key names call ``checked_text`` /
``checked_reason`` here before they act, so a reason the audit log cannot store refuses the act
instead of failing its entry after the act.
"""

from __future__ import annotations

from config.errors import InvalidText, ReasonRequired
from config.feed_text import unstorable_text

#: The longest free text (a reason) any surface takes; the API's bodies use the same bound.
MAX_TEXT_LENGTH = 2000


def text_problem(value: str, *, max_length: int = MAX_TEXT_LENGTH) -> str | None:
    """Why ``value`` breaks the text rule, or None."""
    problem = unstorable_text(value)
    if problem:
        return problem
    if len(value) > max_length:
        return f"is longer than {max_length} characters"
    return None


def checked_text(value: str, *, field: str, max_length: int = MAX_TEXT_LENGTH) -> str:
    """``value`` when it keeps the text rule; InvalidText naming ``field`` when it does not."""
    problem = text_problem(value, max_length=max_length)
    if problem:
        raise InvalidText(f"{field} {problem}", field=field)
    return value


def checked_reason(value: str | None, *, required: bool, what: str = "this act") -> str | None:
    """An operator's reason, stripped (None when blank): ReasonRequired when ``required`` and blank,
    InvalidText when it breaks the text rule."""
    text = (value or "").strip()
    if required and not text:
        raise ReasonRequired(f"{what} needs a reason (it goes into the audit log)")
    return checked_text(text, field="reason") or None

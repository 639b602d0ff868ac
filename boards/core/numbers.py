"""Numbers read from text: one parser for task ids, whole numbers, days and amounts.

Python's own parsers are too lenient for input from people and agents.
``str.isdigit()`` is true for "²", which ``int()`` then refuses (an unhandled
500), and for "٣" and "１０", which ``int()`` reads as 3 and 10 (the wrong task);
``int()`` also takes " 3", "+3" and "1_0". ``Decimal()`` takes "NaN" and
"Infinity", which no comparison survives, and ``date.fromisoformat()`` takes
years so far off that a range of days around them overflows. So every door
that reads a number from text reads it here: the ASCII digits 0-9 only, a
bounded length, and a refusal (400, ``InvalidInput``) that names the field.
"""

from __future__ import annotations

import re
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from boards.core.errors import InvalidInput

ASCII_DIGITS = re.compile(r"[0-9]+")
# A task (or token, webhook, delivery) number is a database integer: nine digits always fit.
ID_DIGITS = 9
# Event sequence numbers stay below 2**62: eighteen digits.
SEQ_DIGITS = 18
DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# Days a board can be asked about. Far enough from date.min and date.max that a
# metrics range (up to a year before the day) never leaves what ``date`` holds.
YEAR_MIN, YEAR_MAX = 1970, 2999
AMOUNT = re.compile(r"-?(?:[0-9]{1,15}(?:\.[0-9]{0,12})?|\.[0-9]{1,12})")


def refusal(field: str, message: str) -> InvalidInput:
    """The one way a number is refused: ``<field>: <message>``, the field named in details."""
    return InvalidInput(f"{field}: {message}", field=field)


FOREIGN_DIGITS = "write numbers with the digits 0-9"


def foreign_digits(text: str) -> bool:
    """Whether ``text`` holds a digit of another script or a superscript ("٣", "１０", "²").

    Such text looks like a number to whoever typed it, so it is refused by name
    rather than answered "not found" or silently ignored.
    """
    return any(c.isdigit() and not c.isascii() for c in text[:200])


def _check_script(text: str, field: str) -> None:
    if foreign_digits(text):
        raise refusal(field, FOREIGN_DIGITS)


def spelled(text: str, max_digits: int = ID_DIGITS) -> int | None:
    """The whole number ``text`` is, written in ASCII digits (at most ``max_digits``); else None."""
    if len(text) <= max_digits and ASCII_DIGITS.fullmatch(text):
        return int(text)
    return None


def digits(text: str, *, field: str, max_digits: int = ID_DIGITS) -> int | None:
    """As ``spelled``, and digits of other scripts are refused, naming ``field``."""
    number = spelled(text, max_digits)
    if number is None:
        _check_script(text, field)
    return number


# A task's (or another row's) number as a URL path and the JSON Schemas spell it.
ID_PATTERN = f"[0-9]{{1,{ID_DIGITS}}}"


def task_text(value: Any) -> Any:
    """The one reading of a task number as people and agents write it: ``3``, ``"3"``,
    ``"#3"`` and ``" 3 "`` are all ``"3"`` (LLMs often send 3 or "#3" for "3").

    Text that is not digits comes back stripped the same way (a batch's ref, "#api" →
    "api"), and a value that is neither int nor str as it is, for the caller to refuse.
    Digits of another script raise ``ValueError(FOREIGN_DIGITS)``: "٣" is not task 3, nor
    "²" a 500. Pydantic inputs use it as their validator; ``id_number`` reads its number.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        return value
    text = value.strip().lstrip("#")
    if foreign_digits(text):
        raise ValueError(FOREIGN_DIGITS)
    return text


def id_number(value: Any, *, field: str = "taskId") -> int | None:
    """A task's (or another row's) public number, read by ``task_text``: ``"#3"`` → 3;
    None when ``value`` names none (not a number, negative, too long). Digits of another
    script are refused (400), naming ``field``."""
    try:
        text = task_text(value)
    except ValueError:
        raise refusal(field, FOREIGN_DIGITS) from None
    return spelled(text) if isinstance(text, str) else None


def whole(text: str, *, field: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` written in ASCII digits, else refused."""
    number = digits(text, field=field, max_digits=len(str(high)))
    if number is None or not low <= number <= high:
        raise refusal(field, f"a whole number from {low} to {high}")
    return number


def day(text: str, *, field: str) -> date:
    """A day written ``YYYY-MM-DD`` in the years ``YEAR_MIN`` to ``YEAR_MAX``, else refused."""
    if DAY.fullmatch(text):
        try:
            parsed = date.fromisoformat(text)
        except ValueError:
            pass
        else:
            if YEAR_MIN <= parsed.year <= YEAR_MAX:
                return parsed
            raise refusal(field, f"a date in the years {YEAR_MIN} to {YEAR_MAX}")
    _check_script(text, field)
    raise refusal(field, "a date like 2026-11-20")


def amount(value: Any, *, field: str) -> Decimal | None:
    """A finite decimal number: a string like ``"12.50"`` (ASCII digits, an optional minus) or
    an int, float or Decimal; None for anything else (NaN, Infinity, "1e3", a bool).
    The caller checks the range and says what the field takes."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not AMOUNT.fullmatch(text):
            _check_script(text, field)
            return None
        return Decimal(text)
    if isinstance(value, int | float | Decimal):
        try:
            number = Decimal(value) if isinstance(value, int | Decimal) else Decimal(str(value))
        except (InvalidOperation, ValueError):
            return None
        return number if number.is_finite() else None
    return None

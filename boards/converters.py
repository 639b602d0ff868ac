"""URL converters."""

from .numbers import ID_DIGITS


class NumberConverter:
    """A whole number of at most nine ASCII digits: anything longer cannot name a row."""

    regex = f"[0-9]{{1,{ID_DIGITS}}}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)

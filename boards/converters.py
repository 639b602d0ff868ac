"""URL converters."""


class NumberConverter:
    """A positive integer of at most nine digits: anything longer cannot name a row."""

    regex = "[0-9]{1,9}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)

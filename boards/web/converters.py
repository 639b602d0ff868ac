"""URL converters."""

from boards.core import numbers


class NumberConverter:
    """A row's number in a path (a task, token, webhook…): at most nine ASCII digits, read
    as every door reads a task number (``numbers.id_number``); anything longer cannot name
    a row."""

    regex = numbers.ID_PATTERN

    def to_python(self, value: str) -> int:
        number = numbers.id_number(value)
        if number is None:  # the regex lets only numbers through; Django answers 404
            raise ValueError(value)
        return number

    def to_url(self, value: int) -> str:
        return str(value)

"""One attribute per line: rewrite an HTML start tag longer than ``TAG_LIMIT`` characters in a
Django template so that each attribute sits on a line of its own, indented under the tag.

djade formats Django's template tags but leaves HTML attributes alone, and the board's
templates grew start tags of 300 characters (a card, a need, a form with hx-post). This does
the one thing djade does not, without changing what a page means:

- only the whitespace *inside* a start tag changes (between attributes, where HTML reads any
  run of spaces and newlines the same); text, and the space between tags, is never touched;
- a template tag or variable is never split (Django reads ``{% ... %}`` on one line only),
  and an ``{% if %}...{% endif %}`` inside a tag stays whole, on one line, as one
  "attribute" (``{% if oob %} hx-swap-oob="true"{% endif %}``), as does an attribute whose
  name or value a condition completes (``sort{% if desc %}="desc"{% endif %}``);
- nothing inside ``<pre>``, ``<textarea>``, ``<script>``, ``<style>``, an HTML comment,
  ``{# #}``, ``{% comment %}`` or ``{% verbatim %}`` is rewritten;
- a tag it cannot read with certainty (a ``>`` or an open quote inside a condition, a
  condition not closed inside the tag) is left as it is.

``python manage.py formattemplates [--check]`` runs it over templates/;
tests/test_templates_format.py holds the templates to it and to ``LINE_LIMIT``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

# A start tag longer than this (written on one line) goes one attribute per line.
TAG_LIMIT = 100
# No template line may be longer than this (the test's bound).
LINE_LIMIT = 200
# Attributes sit this much deeper than the line the tag starts on (children sit 2 deeper).
ATTRIBUTE_INDENT = "    "

# Django's own lexer (django.template.base.tag_re): a template token never spans lines.
TOKEN = re.compile(r"{%.*?%}|{{.*?}}|{#.*?#}")
BLOCK_NAME = re.compile(r"{%-?\s*(\w+)")
# Template tags that open a block closed by end<name>.
OPENERS = frozenset(
    {"if", "for", "with", "ifchanged", "filter", "autoescape", "spaceless", "block", "partialdef"}
)
# Elements whose content is text the browser keeps as written (or code): left alone.
RAW_ELEMENTS = ("pre", "textarea", "script", "style")
TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9:._-]*")


class Unreadable(Exception):
    """A start tag this formatter cannot read with certainty: it is left as written."""


@dataclass(frozen=True)
class StartTag:
    start: int  # index of "<"
    end: int  # index just past ">"
    name: str
    units: tuple[str, ...]  # the attributes (and conditions holding attributes), verbatim
    closing: str  # ">" or "/>"

    @property
    def flat_length(self) -> int:
        """Its length written on one line, one space between attributes."""
        return 1 + len(self.name) + sum(1 + len(unit) for unit in self.units) + len(self.closing)


def _token_at(text: str, i: int) -> re.Match[str] | None:
    return TOKEN.match(text, i) if text.startswith(("{%", "{{", "{#"), i) else None


def _block_change(token: str) -> int:
    """+1 for a template tag that opens a block, -1 for one that closes it, else 0."""
    if not token.startswith("{%"):
        return 0
    match = BLOCK_NAME.match(token)
    name = match.group(1) if match else ""
    if name in OPENERS:
        return 1
    return -1 if name.startswith("end") else 0


def _skip_quoted(text: str, i: int) -> int:
    """The index just past the quoted value starting at ``i`` (template tokens inside it are
    read whole, so ``"{{ x|default:'' }}"`` ends at its last quote)."""
    quote = text[i]
    depth = 0
    i += 1
    while i < len(text):
        token = _token_at(text, i)
        if token:
            depth += _block_change(token.group())
            if depth < 0:
                raise Unreadable("a quote opened inside a condition")
            i = token.end()
            continue
        if text[i] == quote:
            if depth:
                raise Unreadable("a condition left open inside a quoted value")
            return i + 1
        if text[i] == "\n":
            raise Unreadable("a quoted value across lines")
        i += 1
    raise Unreadable("a quote never closed")


def _skip_block(text: str, i: int) -> int:
    """The index just past the ``{% end... %}`` closing the block opened at ``i``."""
    depth = 0
    while i < len(text):
        token = _token_at(text, i)
        if token:
            depth += _block_change(token.group())
            i = token.end()
            if depth == 0:
                return i
            continue
        char = text[i]
        if char in "\"'":
            i = _skip_quoted(text, i)
        elif char in "<>":
            raise Unreadable("a tag boundary inside a condition")
        else:
            i += 1
    raise Unreadable("a condition never closed")


def _opens_block(text: str, i: int) -> re.Match[str] | None:
    token = _token_at(text, i)
    return token if token and _block_change(token.group()) == 1 else None


def read_start_tag(text: str, start: int) -> StartTag:
    """The start tag at ``start`` (``text[start] == "<"``), its attributes as units."""
    name_match = TAG_NAME.match(text, start + 1)
    if not name_match:
        raise Unreadable("no tag name")
    i = name_match.end()
    units: list[str] = []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            raise Unreadable("a tag never closed")
        if text[i] == ">":
            return StartTag(start, i + 1, name_match.group(), tuple(units), ">")
        if text.startswith("/>", i):
            return StartTag(start, i + 2, name_match.group(), tuple(units), "/>")
        # One unit: a run up to whitespace or the tag's end, quotes and conditions whole. A
        # condition whose content starts with a space is an attribute of its own, so it
        # starts a unit of its own too (value="x"{% if on %} checked{% endif %}).
        unit_start = i
        while i < len(text) and not text[i].isspace() and text[i] != ">":
            if text.startswith("/>", i):
                break
            if text[i] in "\"'":
                i = _skip_quoted(text, i)
                continue
            block = _opens_block(text, i)
            if block:
                if i > unit_start and block.end() < len(text) and text[block.end()].isspace():
                    break
                i = _skip_block(text, i)
                continue
            token = _token_at(text, i)
            if token:
                if _block_change(token.group()):
                    raise Unreadable("a condition closed inside a tag it did not open in")
                i = token.end()
                continue
            if text[i] == "<":
                raise Unreadable("a '<' inside a tag")
            i += 1
        units.append(text[unit_start:i])


def _canonical(tag: StartTag, indent: str) -> str:
    lines = [f"<{tag.name}"] + [indent + unit for unit in tag.units]
    closing = tag.closing if tag.closing == ">" else " " + tag.closing
    return "\n".join(lines) + closing


@dataclass
class Result:
    text: str
    rewritten: list[int]  # the input's lines (1-based) the rewriting changes
    skipped: list[tuple[int, str]]  # long tags left as written: (line, why)


def start_tags(text: str) -> tuple[list[StartTag], list[tuple[int, str]]]:
    """The start tags of ``text`` this may rewrite, and the long ones it cannot read."""
    tags: list[StartTag] = []
    skipped: list[tuple[int, str]] = []
    raw_until: str | None = None  # the end of the raw element or comment we are in
    i = 0
    n = len(text)
    while i < n:
        if raw_until is not None:
            found = re.compile(re.escape(raw_until), re.IGNORECASE).search(text, i)
            if not found:
                break
            i = found.start()
            raw_until = None
            continue
        token = _token_at(text, i)
        if token:
            i = token.end()
            word = BLOCK_NAME.match(token.group())
            if word and word.group(1) in ("comment", "verbatim"):
                raw_until = "{% end" + word.group(1)
            continue
        if text.startswith("<!--", i):
            raw_until = "-->"
            i += 4
            continue
        if text[i] == "<" and i + 1 < n and text[i + 1].isalpha():
            try:
                tag = read_start_tag(text, i)
            except Unreadable as why:
                end = text.find(">", i)
                if end < 0 or end - i > TAG_LIMIT:
                    skipped.append((text.count("\n", 0, i) + 1, str(why)))
                i += 1
                continue
            tags.append(tag)
            i = tag.end
            if tag.name.lower() in RAW_ELEMENTS and tag.closing == ">":
                raw_until = f"</{tag.name.lower()}"
            continue
        i += 1
    return tags, skipped


def _line_start(text: str, i: int) -> int:
    return text.rfind("\n", 0, i) + 1


def _rewrite(text: str, tag: StartTag) -> str:
    line = text[_line_start(text, tag.start) : tag.start]
    indent = line[: len(line) - len(line.lstrip())]
    return text[: tag.start] + _canonical(tag, indent + ATTRIBUTE_INDENT) + text[tag.end :]


def _is_canonical(text: str, tag: StartTag) -> bool:
    return _rewrite(text, tag) == text


def format_template(text: str, limit: int = TAG_LIMIT) -> Result:
    """``text`` with every start tag longer than ``limit`` one attribute per line. Tags are
    rewritten one at a time from the top, so a tag's indent is that of the line it starts on
    as rewritten (two long tags on one line: the second goes under the first's last line)."""
    skipped: list[tuple[int, str]] = []
    before = text
    while True:
        tags, skipped = start_tags(text)
        tag = next((t for t in tags if t.flat_length > limit and not _is_canonical(text, t)), None)
        if tag is None:
            break
        text = _rewrite(text, tag)
    return Result(text, _changed_lines(before, text), skipped)


def _changed_lines(before: str, after: str) -> list[int]:
    """The lines (1-based) of ``before`` that ``after`` writes otherwise."""
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    return [
        line + 1
        for op, i1, i2, _, _ in matcher.get_opcodes()
        if op != "equal"
        for line in range(i1, i2)
    ]


def long_lines(text: str, limit: int = LINE_LIMIT) -> list[int]:
    """The line numbers (1-based) of the lines longer than ``limit``."""
    return [number for number, line in enumerate(text.splitlines(), 1) if len(line) > limit]

"""HTML as a browser reads it, for tests that look for a piece of a page by its text: the
templates write long start tags one attribute per line and wrap long text (formattemplates),
and a browser reads any run of white space there as one space (``<pre>`` aside)."""

import re

START_TAG = re.compile(r"<[a-zA-Z][^<>]*>")
SPACE = re.compile(r"\s+")


def _tag(match: re.Match[str]) -> str:
    return SPACE.sub(" ", match.group()).replace(" >", ">")


def flat(html: str | bytes) -> str:
    """``html`` with each start tag on one line (one space between attributes) and every run
    of white space one space."""
    text = html.decode() if isinstance(html, bytes) else html
    return SPACE.sub(" ", START_TAG.sub(_tag, text))

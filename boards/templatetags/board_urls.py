"""``{% task_url slug number %}``: a task's address without resolving the URLconf per card;
``{% task_url_template slug %}``: the same with ``{number}`` for a page script to fill in.

A board page links every card (and its blockers) to the task's panel; ``{% url %}`` does a
full reverse each time, a third of the page's render. The prefix is reversed once per board
(and script prefix) and the number appended.
"""

from __future__ import annotations

from functools import lru_cache

from django import template
from django.urls import get_script_prefix, reverse

register = template.Library()


@lru_cache(maxsize=512)
def _prefix(script_prefix: str, slug: str) -> str:
    sample = reverse("task", args=[slug, 1])
    assert sample.endswith("/1/"), sample
    return sample[: -len("1/")]


@register.simple_tag
def task_url(slug: str, number: int | str) -> str:
    return f"{_prefix(get_script_prefix(), slug)}{int(number)}/"


@register.simple_tag
def task_url_template(slug: str) -> str:
    """The address of the board's tasks with ``{number}`` in place of the number (the graph
    page's nodes are drawn from JSON: the page script puts each node's number there)."""
    return f"{_prefix(get_script_prefix(), slug)}{{number}}/"


@register.filter
def of(mapping: dict, key: str) -> object:
    """``{{ doing|of:view.task.owner }}``: a mapping's value for a key (or empty)."""
    return mapping.get(key, "") if isinstance(mapping, dict) else ""

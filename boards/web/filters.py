"""The board's search and filters, read from a query string: the page's URL (shareable,
back and forward) and the board socket's URL (so pushes keep to them) read it alike. The
activity feed's filters likewise (its page and its socket)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.http import QueryDict

from boards.core import limits, numbers
from boards.core.errors import InvalidInput
from boards.core.fulltext import search_terms
from boards.core.selectors import TaskFilter
from boards.core.states import Priority
from boards.models import Status

PRIORITIES = {label: value for value, label in Priority.choices}


class BoardFilterForm(forms.Form):
    q = forms.CharField(required=False, strip=True)
    owner = forms.CharField(required=False, max_length=100)
    label = forms.CharField(required=False, max_length=64)
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *Status.choices])
    priority = forms.ChoiceField(
        required=False, choices=[("", "any priority")] + [(p, p) for p in PRIORITIES]
    )


@dataclass
class BoardFilter:
    """The filter to apply (empty when nothing, or nothing usable, was asked), the form to
    show again, the reason a search could not be made, and the query string that gives
    this filter back (the socket's URL and "show more" carry it)."""

    filter: TaskFilter
    form: BoardFilterForm
    error: str = ""
    query: str = ""


def board_filter(params: QueryDict) -> BoardFilter:
    """The board's filters from ``params``. A value that is not a choice is ignored; a
    search with no word to look for, or longer than 200 characters, is not applied and
    says why (``error``)."""
    form = BoardFilterForm(params)
    form.is_valid()
    data = {k: v for k, v in form.cleaned_data.items() if v}
    error = ""
    terms = None
    if data.get("q"):
        try:
            terms = search_terms(data["q"], field="search")
        except InvalidInput as exc:
            error = "Search: " + exc.message.partition(": ")[2]
            data.pop("q")
    chosen = TaskFilter(
        terms=terms,
        owner=data.get("owner"),
        status=data.get("status"),
        priority=PRIORITIES[data["priority"]] if data.get("priority") else None,
        label=data.get("label"),
    )
    kept = {k: data[k] for k in ("q", "owner", "label", "status", "priority") if k in data}
    return BoardFilter(chosen, form, error, urlencode(kept))


ACTIVITY_SHOW = ("matters", "all")


def activity_filters(params: QueryDict) -> dict[str, Any]:
    """The activity feed's filters (``selectors.activity_page``'s arguments); ``show`` is
    "matters" (failures, approvals, reassignments, reclaims, needs attention: the default
    when nothing else is asked) or "all". A bad value raises ``InvalidInput`` naming it."""
    filters: dict[str, Any] = {
        "actor": params.get("actor", "").strip()[: limits.PERSON_NAME_MAX],
        "kind": params.get("kind", "").strip()[: limits.EVENT_KIND_MAX],
        "task": numbers.id_number(params.get("task", ""), field="task"),
    }
    show = params.get("show", "")
    if show and show not in ACTIVITY_SHOW:
        raise InvalidInput("show: matters or all", field="show")
    asked = filters["actor"] or filters["kind"] or filters["task"] is not None
    filters["matters"] = show == "matters" or (not show and not asked)
    return filters

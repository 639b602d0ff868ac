"""Finding tasks by their text (``fulltext``), and the board's filters that go with it.

Each function takes the tasks already filtered (a board, a view, an owner …) as a
queryset and narrows them in SQL, so a search composes with every other filter and
costs the same few queries on any board.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.search import SearchHeadline, SearchRank
from django.db import connection
from django.db.models import Count, QuerySet, TextField, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Concat

from boards.core.fulltext import (
    FTS_WEIGHTS,
    MARK_START,
    MARK_STOP,
    PG_CONFIG,
    Terms,
    pg_query,
    pg_vector,
)
from boards.core.rules import column_of
from boards.models import Task

SNIPPET_WORDS = 12

# The snippet in the same query as the rank: FTS5 writes it from the match it is walking,
# where a second query by rowid makes it find every prefix's words again for each task
# (12 ms for a page of a 5,000-task board, against 1 ms here).
_RANKED = (
    "SELECT t.id, t.number, snippet(boards_task_fts, -1, %s, %s, '…', %s) FROM boards_task_fts "
    "JOIN boards_task t ON t.id = boards_task_fts.rowid "
    "WHERE boards_task_fts MATCH %s AND t.id IN ({tasks}) "
    "ORDER BY bm25(boards_task_fts, {weights}), t.number LIMIT %s OFFSET %s"
)
_SNIPPETS = (
    "SELECT rowid, snippet(boards_task_fts, -1, %s, %s, '…', %s) FROM boards_task_fts "
    "WHERE boards_task_fts MATCH %s AND rowid IN ({pks})"
)


def _sqlite() -> bool:
    return connection.vendor == "sqlite"


def search_matching(rows: QuerySet[Task], terms: Terms) -> QuerySet[Task]:
    """``rows`` that hold every word of the search (as a word's start)."""
    if _sqlite():
        found = RawSQL(
            "SELECT rowid FROM boards_task_fts WHERE boards_task_fts MATCH %s", [terms.fts5()]
        )
        return rows.filter(pk__in=found)
    return rows.annotate(search_vector=pg_vector()).filter(search_vector=pg_query(terms))


def search_ranked(
    rows: QuerySet[Task], terms: Terms, *, limit: int, offset: int = 0
) -> list[tuple[int, int, str]]:
    """(pk, number, snippet) of the matching ``rows``, best match first (ties: lowest
    number), ``limit`` of them after the first ``offset``; the snippet as
    ``search_snippets`` writes it."""
    if _sqlite():
        inner, params = rows.order_by().values("pk").query.sql_with_params()
        # The filtered tasks' SQL as Django compiled it (its values are parameters).
        sql = _RANKED.format(tasks=inner, weights=FTS_WEIGHTS)
        marks: list[Any] = [MARK_START, MARK_STOP, SNIPPET_WORDS]
        with connection.cursor() as cursor:
            cursor.execute(sql, [*marks, terms.fts5(), *params, limit, offset])
            return [(pk, number, snippet or "") for pk, number, snippet in cursor.fetchall()]
    query = pg_query(terms)
    ranked = list(
        search_matching(rows, terms)
        .annotate(rank=SearchRank(pg_vector(), query))
        .order_by("-rank", "number")
        .values_list("pk", "number")[offset : offset + limit]
    )
    # Headlines of the page's tasks only: ts_headline re-reads each one's text.
    snippets = search_snippets([pk for pk, _ in ranked], terms)
    return [(pk, number, snippets.get(pk, "")) for pk, number in ranked]


def search_snippets(pks: Iterable[int], terms: Terms) -> dict[int, str]:
    """Where each task matched: a few words around the matches, marked with
    ``fulltext.MARK_START``/``MARK_STOP`` (the caller turns them into its own marks)."""
    pks = list(pks)
    if not pks:
        return {}
    if _sqlite():
        sql = _SNIPPETS.format(pks=", ".join(["%s"] * len(pks)))
        with connection.cursor() as cursor:
            cursor.execute(sql, [MARK_START, MARK_STOP, SNIPPET_WORDS, terms.fts5(), *pks])
            return dict(cursor.fetchall())
    text = Concat(
        "subject",
        Value(" — "),
        "description",
        Value(" "),
        "notes",
        Value(" "),
        "result",
        Value(" "),
        "prompt",
        output_field=TextField(),
    )
    headline = SearchHeadline(
        text,
        pg_query(terms),
        config=PG_CONFIG,
        start_sel=MARK_START,
        stop_sel=MARK_STOP,
        max_words=SNIPPET_WORDS * 2,
        min_words=SNIPPET_WORDS // 2,
        max_fragments=2,
        fragment_delimiter=" … ",
    )
    rows = Task.objects.filter(pk__in=pks).annotate(match=headline).values_list("pk", "match")
    return dict(rows)


@dataclass(frozen=True)
class TaskFilter:
    """What a person filters the board by (the page's query string, ``filters``)."""

    terms: Terms | None = None
    owner: str | None = None
    status: str | None = None
    priority: int | None = None
    label: str | None = None

    def __bool__(self) -> bool:
        chosen = (self.terms, self.owner, self.status, self.priority, self.label)
        return any(v is not None for v in chosen)

    def apply(self, rows: QuerySet[Task]) -> QuerySet[Task]:
        if self.owner is not None:
            rows = rows.filter(owner=self.owner)
        if self.status is not None:
            rows = rows.filter(status=self.status)
        if self.priority is not None:
            rows = rows.filter(priority=self.priority)
        if self.label is not None:
            rows = rows.filter(label_rows__name=self.label.lower())
        if self.terms is not None:
            rows = search_matching(rows, self.terms)
        return rows


def filtered_column_counts(rows: QuerySet[Task]) -> dict[str, int]:
    """Cards per column among ``rows`` (already filtered), in one query."""
    counts = dict.fromkeys(("pending", "in_progress", "blocked", "completed"), 0)
    grouped: Any = rows.order_by().values_list("status", "blocked").annotate(n=Count("pk"))
    for status, blocked, n in grouped:
        counts[column_of(status, blocked)] += n
    return counts

"""Full-text search over a task's text, as each store does it.

Searched: subject, description, notes, result and prompt.

- SQLite: an FTS5 table with external content (``boards_task``), kept in step by
  triggers on insert, update (of the searched text only) and delete; ``bm25`` ranks,
  ``snippet`` highlights. ``manage.py rebuildsearch`` re-reads every task.
- PostgreSQL: a weighted ``tsvector`` expression (subject A, description B, the rest C)
  with a GIN index on that same expression; ``ts_rank`` ranks, ``ts_headline``
  highlights.

What a person or an agent types is never handed to either query language: it is cut
into words (letters and digits) and each word becomes a quoted prefix term, all of
them required, so no input is a syntax error. Only a query too long, or with no word
left, is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connections
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.models.expressions import CombinedExpression

from boards.core.errors import InvalidInput

QUERY_MAX_CHARS = 200
# More words than this only narrow a search that already found little.
QUERY_MAX_WORDS = 16
SEARCHED = ("subject", "description", "notes", "result", "prompt")

# Letters and digits of any script; the underscore and everything else separate words,
# as both stores' tokenizers do.
_WORD = re.compile(r"[^\W_]+")

# The highlight's marks as the stores write them: characters no task text is allowed to
# hold in a search answer, turned into <mark> (the board) or ** (agents) afterwards.
MARK_START = "\x02"
MARK_STOP = "\x03"


@dataclass(frozen=True)
class Terms:
    """A search as typed, cut into the words both stores look for (each as a prefix)."""

    text: str
    words: tuple[str, ...]

    def fts5(self) -> str:
        # Quoted: FTS5's operators (AND, NEAR, *, ^, -, parentheses) are then plain words.
        return " ".join(f'"{word}"*' for word in self.words)

    def tsquery(self) -> str:
        # to_tsquery's raw syntax, safe because every word holds letters and digits only.
        return " & ".join(f"{word}:*" for word in self.words)


def search_terms(text: str, *, field: str = "query") -> Terms:
    """The words of a search; refused (400, naming ``field``) when too long or wordless."""
    if len(text) > QUERY_MAX_CHARS:
        raise InvalidInput(
            f"{field}: at most {QUERY_MAX_CHARS} characters ({len(text)} given)", field=field
        )
    words = tuple(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:QUERY_MAX_WORDS]
    if not words:
        raise InvalidInput(
            f"{field}: nothing to search for; give at least one word of letters or digits",
            field=field,
        )
    return Terms(text=text, words=words)


# ---- PostgreSQL ------------------------------------------------------------------------

PG_CONFIG = "simple"  # no stemming and no stop words: the same words SQLite's index holds
PG_INDEX = "task_search"


def pg_vector() -> CombinedExpression:
    """The weighted vector; the GIN index is built on this very expression (migration)."""
    return (
        SearchVector("subject", weight="A", config=PG_CONFIG)
        + SearchVector("description", weight="B", config=PG_CONFIG)
        + SearchVector("notes", "result", "prompt", weight="C", config=PG_CONFIG)
    )


def pg_query(terms: Terms) -> SearchQuery:
    return SearchQuery(terms.tsquery(), search_type="raw", config=PG_CONFIG)


# ---- SQLite ----------------------------------------------------------------------------

FTS_TABLE = "boards_task_fts"
# Column weights for bm25, in the table's column order (SEARCHED): a word in the
# subject counts most.
FTS_WEIGHTS = "10.0, 4.0, 2.0, 2.0, 2.0"

# Written out (the table, its columns in SEARCHED's order): SQL to read, not to assemble.
FTS_CREATE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS boards_task_fts USING fts5("
    "subject, description, notes, result, prompt, "
    "content='boards_task', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2', prefix='2 3')"
)
# Triggers, by name. A table that a later migration rebuilds (SQLite's way of altering a
# column) loses its triggers: ``after_migrate`` puts them back.
FTS_TRIGGERS = {
    "boards_task_fts_insert": (
        "CREATE TRIGGER IF NOT EXISTS boards_task_fts_insert AFTER INSERT ON boards_task BEGIN "
        "INSERT INTO boards_task_fts(rowid, subject, description, notes, result, prompt) "
        "VALUES (new.id, new.subject, new.description, new.notes, new.result, new.prompt); END"
    ),
    # Only when the searched text changed: most writes (status, owner, leases) leave it.
    "boards_task_fts_update": (
        "CREATE TRIGGER IF NOT EXISTS boards_task_fts_update AFTER UPDATE ON boards_task "
        "WHEN old.subject IS NOT new.subject OR old.description IS NOT new.description "
        "OR old.notes IS NOT new.notes OR old.result IS NOT new.result "
        "OR old.prompt IS NOT new.prompt BEGIN "
        "INSERT INTO boards_task_fts(boards_task_fts, rowid, subject, description, notes, "
        "result, prompt) VALUES ('delete', old.id, old.subject, old.description, old.notes, "
        "old.result, old.prompt); "
        "INSERT INTO boards_task_fts(rowid, subject, description, notes, result, prompt) "
        "VALUES (new.id, new.subject, new.description, new.notes, new.result, new.prompt); END"
    ),
    "boards_task_fts_delete": (
        "CREATE TRIGGER IF NOT EXISTS boards_task_fts_delete AFTER DELETE ON boards_task BEGIN "
        "INSERT INTO boards_task_fts(boards_task_fts, rowid, subject, description, notes, "
        "result, prompt) VALUES ('delete', old.id, old.subject, old.description, old.notes, "
        "old.result, old.prompt); END"
    ),
}
FTS_REBUILD = "INSERT INTO boards_task_fts(boards_task_fts) VALUES ('rebuild')"
FTS_EXISTING = (
    "SELECT name FROM sqlite_master WHERE name IN ("
    "'boards_task_fts', 'boards_task_fts_insert', 'boards_task_fts_update', "
    "'boards_task_fts_delete')"
)


def sqlite_install(cursor: Any) -> bool:
    """Create the FTS5 table and its triggers where missing; when anything was missing,
    re-read every task into the index. True when it did."""
    cursor.execute(FTS_EXISTING)
    existing = {name for (name,) in cursor.fetchall()}
    missing = {FTS_TABLE, *FTS_TRIGGERS} - existing
    if not missing:
        return False
    cursor.execute(FTS_CREATE)
    for sql in FTS_TRIGGERS.values():
        cursor.execute(sql)
    cursor.execute(FTS_REBUILD)
    return True


def after_migrate(using: str = "default", **kwargs: Any) -> None:
    """``post_migrate``: a migration that rebuilt ``boards_task`` (SQLite alters a column
    that way) dropped the triggers with the old table; put them back and re-read the
    index. Nothing is done before the search migration has made the index."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE name = %s", [FTS_TABLE])
        if cursor.fetchone() is not None:
            sqlite_install(cursor)


def install(schema_editor: BaseDatabaseSchemaEditor, task_model: Any) -> None:
    """The migration's forward step, on either store."""
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        with schema_editor.connection.cursor() as cursor:
            sqlite_install(cursor)
    elif vendor == "postgresql":
        schema_editor.add_index(task_model, pg_index())


def uninstall(schema_editor: BaseDatabaseSchemaEditor, task_model: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        schema_editor.execute("DROP TRIGGER IF EXISTS boards_task_fts_insert")
        schema_editor.execute("DROP TRIGGER IF EXISTS boards_task_fts_update")
        schema_editor.execute("DROP TRIGGER IF EXISTS boards_task_fts_delete")
        schema_editor.execute("DROP TABLE IF EXISTS boards_task_fts")
    elif vendor == "postgresql":
        schema_editor.remove_index(task_model, pg_index())


def pg_index() -> GinIndex:
    return GinIndex(pg_vector(), name=PG_INDEX)


def highlighted(snippet: str, start: str, stop: str) -> str:
    """A store's snippet with its marks replaced (the text around them left as it is)."""
    return snippet.replace(MARK_START, start).replace(MARK_STOP, stop)

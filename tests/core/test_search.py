"""Full-text search: TaskList {"query"} for agents (issue #24, item 3), on either store."""

import pytest
from django.core.management import call_command
from django.db import connection

from boards.core import fulltext
from boards.core.fulltext import search_terms
from boards.core.selectors import search_matching
from boards.models import Task
from tests.support.factories import make_task


def search(client, query, **more):
    reply = client.call("TaskList", {"query": query, **more})
    assert reply.status == 200, reply.body
    return reply.body


def ids(body):
    return [t["id"] for t in body["tasks"]]


def test_a_word_in_the_notes_is_found_within_the_write_and_not_after_it_is_removed(alice):
    alice.create("Tidy the kitchen")
    alice.create("Write the report")
    assert search(alice, "zeppelin")["tasks"] == []
    alice.call("TaskUpdate", {"taskId": "2", "notes": "Ask about the zeppelin first"})
    found = search(alice, "zeppelin")
    assert ids(found) == ["2"]
    assert found["total"] == 1
    assert "Ask about the **zeppelin** first" in found["tasks"][0]["match"]
    alice.call("TaskUpdate", {"taskId": "2", "notes": "Ask about the airship first"})
    assert search(alice, "zeppelin")["tasks"] == []
    assert ids(search(alice, "airship")) == ["2"]


@pytest.mark.parametrize("field", ["subject", "description", "notes", "result", "prompt"])
def test_every_searched_field_is_found(alice, field):
    alice.create("Plain task")
    if field == "subject":
        alice.create("Quokka census")
    else:
        alice.create("Other task")
        alice.call("TaskUpdate", {"taskId": "2", field: "count the quokka colony"})
    assert ids(search(alice, "quokka")) == ["2"]


def test_a_word_prefix_finds_the_longer_word(alice):
    alice.create("Run the migration", description="")
    alice.create("Migrate the users")
    alice.create("Write docs")
    assert sorted(ids(search(alice, "migr"))) == ["1", "2"]
    assert sorted(ids(search(alice, "MIGRAT"))) == ["1", "2"]
    # Every word must be found.
    assert ids(search(alice, "migr users")) == ["2"]


def test_matches_in_the_subject_rank_above_matches_in_the_text(alice):
    alice.create("Write docs", description="mention the parser somewhere")
    alice.create("Something else", prompt="parser notes")
    alice.create("Fix the parser")
    assert ids(search(alice, "parser"))[0] == "3"


def test_search_is_case_blind(alice):
    alice.create("Résumé upload")
    assert ids(search(alice, "RÉSUMÉ")) == ["1"]
    if connection.vendor == "sqlite":  # FTS5 folds accents too; PostgreSQL's index does not
        assert ids(search(alice, "resume")) == ["1"]


def test_search_composes_with_status_owner_blocked_parent_and_view(alice, bob):
    alice.create("Epic about widgets")  # 1
    alice.create("Widget frame", parentId="1")  # 2
    alice.create("Widget paint", parentId="1", blockedBy=["2"])  # 3
    alice.create("Gadget paint")  # 4
    bob.call("TaskClaim", {"taskId": "2"})
    assert sorted(ids(search(alice, "widget"))) == ["1", "2", "3"]
    assert ids(search(alice, "widget", owner="bob")) == ["2"]
    assert ids(search(alice, "widget", status="in_progress")) == ["2"]
    assert ids(search(alice, "widget", blocked=True)) == ["3"]
    assert sorted(ids(search(alice, "widget", parentId="1"))) == ["2", "3"]
    assert ids(search(alice, "paint", view="ready")) == ["4"]
    assert ids(search(alice, "widget", view="in_progress")) == ["2"]


def test_search_composes_with_a_label(alice):
    alice.create("Fix the login", labels=["bug"])
    alice.create("Login page", labels=["feature"])
    assert ids(search(alice, "login", label="BUG")) == ["1"]


def test_search_pages_in_rank_order_with_a_cursor(alice):
    for n in range(7):
        alice.create(f"Sprocket {n}" if n % 2 else f"Other {n}", prompt="sprocket")
    first = search(alice, "sprocket", limit=3)
    assert first["total"] == 7
    assert first["nextCursor"]
    second = search(alice, "sprocket", limit=3, cursor=first["nextCursor"])
    third = search(alice, "sprocket", limit=3, cursor=second["nextCursor"])
    assert third["nextCursor"] is None
    seen = ids(first) + ids(second) + ids(third)
    assert sorted(seen, key=int) == [str(n) for n in range(1, 8)]
    # The subject matches (2, 4, 6) rank first.
    assert sorted(ids(first)[:3], key=int) == ["2", "4", "6"]


def test_a_list_cursor_does_not_continue_a_search(alice):
    for n in range(3):
        alice.create(f"Gear {n}")
    listed = alice.call("TaskList", {"limit": 1}).body
    reply = alice.call("TaskList", {"query": "gear", "cursor": listed["nextCursor"], "limit": 1})
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == "cursor"


def test_search_answers_detail_and_text_formats(alice):
    alice.create("Teach the parrot", prompt="the parrot knows four words")
    detail = search(alice, "parrot", detail=True)
    assert detail["tasks"][0]["prompt"] == "the parrot knows four words"
    assert "**parrot**" in detail["tasks"][0]["match"]
    text = search(alice, "parrot", format="text")["text"]
    assert text.startswith("#1. [ ] Teach the parrot  match: ")
    assert "**parrot**" in text


def test_task_get_is_unchanged_by_search(alice):
    alice.create("Plain")
    assert "match" not in alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert "match" not in alice.call("TaskList", {}).body["tasks"][0]


def test_other_boards_tasks_are_never_found(alice, other_board):
    alice.create("Kumquat jam")
    make_task(other_board, "Kumquat pie")
    assert ids(search(alice, "kumquat")) == ["1"]


def test_a_deleted_task_is_no_longer_found(alice):
    alice.create("Walrus count")
    alice.call("TaskUpdate", {"taskId": "1", "status": "deleted"})
    assert search(alice, "walrus")["tasks"] == []


HOSTILE = [
    '"',
    '""',
    '"unbalanced',
    "NEAR(a b)",
    "a NEAR b",
    "*",
    "a*",
    "-",
    "-a",
    "a -b",
    "(",
    "((a)",
    "a)",
    "AND",
    "a OR",
    "NOT",
    "^a",
    "a:b",
    "subject:a",
    "{a b}",
    "a & | ! b",
    "a:*",
    "'",
    "\\",
    "%",
    "_",
    "a\x00b",
    "\x00",
    "🙂 task",
    "ｆｕｌｌ",
    "<script>",
    "a" * 200,
    "a " * 100,
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_answer_200_or_a_clear_400(alice, query):
    alice.create("a task with some text", prompt="b and more")
    reply = alice.call("TaskList", {"query": query})
    assert reply.status in (200, 400), reply.body
    if reply.status == 400:
        assert reply.error["code"] == "invalid_input"
        assert reply.error["details"][0]["field"] == "query"


def test_a_query_over_200_characters_is_refused(alice):
    reply = alice.call("TaskList", {"query": "x" * 10_000})
    assert reply.status == 400
    assert reply.error["details"][0]["field"] == "query"


@pytest.mark.parametrize("query", ["", "   ", "***", '"()"', "-"])
def test_a_query_without_words_is_refused_with_a_reason(alice, query):
    reply = alice.call("TaskList", {"query": query})
    assert reply.status == 400
    assert "nothing to search for" in reply.error["message"]


def test_a_hostile_word_is_searched_as_a_word(alice):
    alice.create("Avoid NEAR misses")
    assert ids(search(alice, "NEAR")) == ["1"]
    assert ids(search(alice, '"near" (misses')) == ["1"]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's FTS5 index")
def test_a_migrate_puts_back_lost_triggers_and_rebuildsearch_rereads_the_index(board):
    def found(word):
        return search_matching(Task.objects.filter(board=board), search_terms(word)).count()

    with connection.cursor() as cursor:
        # As a migration that rebuilds boards_task leaves it: the triggers gone.
        cursor.execute("DROP TRIGGER boards_task_fts_insert")
    make_task(board, "Okapi sighting")
    assert found("okapi") == 0
    fulltext.after_migrate()
    assert found("okapi") == 1
    make_task(board, "Okapi again")
    assert found("okapi") == 2
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO boards_task_fts(boards_task_fts) VALUES ('delete-all')")
    assert found("okapi") == 0
    call_command("rebuildsearch")
    assert found("okapi") == 2

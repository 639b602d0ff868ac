"""The task's public shape is declared once: the answer model (``answers.Task``) lists
exactly the keys the selectors build (``present.task_to_dict``), so the two cannot
drift with every test green (answers allow extra keys for clients, not for us).

A plain field is one row of ``TASK_FIELDS``: every row shows in the tool inputs (as the
agents' tool listings, TaskBatch's operations and the OpenAPI document publish them) and
in the answer, with its wire name and limit, and an agent sets it, reads it back and is
refused past its limit; so a new row is checked here by being added."""

from typing import Any

import pytest

from boards.agents import answers, pipeline, schemas
from boards.core import selectors
from boards.core.fields import TASK_FIELDS, TaskField
from boards.models import Event
from tests.support.factories import make_task

ROWS = pytest.mark.parametrize("row", TASK_FIELDS, ids=lambda row: row.wire)


def _text(prop: dict[str, Any]) -> dict[str, Any]:
    """A text property's string schema (an update's is ``anyOf`` it and null)."""
    strings = [p for p in prop.get("anyOf", [prop]) if p.get("type") == "string"]
    assert len(strings) == 1, prop
    return strings[0]


def _check_input(schema: dict[str, Any], row: TaskField, *, update: bool, described: bool) -> None:
    allowed = row.updatable if update else row.creatable
    props = schema["properties"]
    if not allowed:
        assert row.wire not in props
        return
    assert row.model not in props or row.model == row.wire  # published by its wire name
    prop = props[row.wire]
    assert _text(prop)["maxLength"] == row.limit
    assert (_text(prop).get("minLength") == 1) is row.required  # never empty, if sent
    assert (row.wire in schema.get("required", [])) is (row.required and not update)
    said = (row.update_help if update else row.help) if described else ""
    assert prop.get("description", "") == said


@ROWS
def test_every_row_is_in_the_tool_inputs_with_its_wire_name_and_limit(row):
    create = pipeline.lookup("TaskCreate").input_schema()
    update = pipeline.lookup("TaskUpdate").input_schema()
    batch = pipeline.lookup("TaskBatch").input_schema()["$defs"]
    _check_input(create, row, update=False, described=True)
    _check_input(update, row, update=True, described=True)
    _check_input(batch["BatchCreate"], row, update=False, described=False)
    _check_input(batch["BatchUpdate"], row, update=True, described=True)
    # The OpenAPI document publishes the same models.
    components = schemas.openapi_document(pipeline.listed())["components"]["schemas"]
    _check_input(components["TaskCreateInput"], row, update=False, described=True)
    _check_input(components["TaskUpdateInput"], row, update=True, described=True)
    _check_input(components["BatchCreate"], row, update=False, described=False)


@ROWS
def test_every_row_is_in_the_answer_model_as_text(row):
    field = answers.Task.model_fields[row.wire]
    assert field.annotation in (str, str | None)
    # Written answers (TaskCreate, TaskUpdate…) publish it in their output schema.
    output = pipeline.lookup("TaskCreate").output_schema()
    assert output is not None
    assert row.wire in output["$defs"]["Task"]["properties"]


def _refused(reply: Any, wire: str) -> None:
    assert reply.status == 400, reply.body
    assert [d["field"] for d in reply.error["details"]] == [wire]


@ROWS
def test_an_agent_sets_every_row_reads_it_back_and_is_refused_past_its_limit(row, alice, board):
    value = "alice" if row.model == "owner" else f"Some {row.wire}"
    too_long = "x" * (row.limit + 1)
    base = {"subject": "Shape"}
    if row.creatable:
        _refused(alice.call("TaskCreate", {**base, row.wire: too_long}), row.wire)
        created = alice.create(**{**base, row.wire: value})
        assert created[row.wire] == value
        batch = alice.call("TaskBatch", {"ops": [{"op": "create", **base, row.wire: value}]})
        assert batch.status == 200, batch.body
        number = batch.body["operations"][0]["taskId"]
        assert alice.call("TaskGet", {"taskId": number}).body["task"][row.wire] == value
    if row.updatable:
        task = alice.create("Updated")
        _refused(alice.call("TaskUpdate", {"taskId": task["id"], row.wire: too_long}), row.wire)
        reply = alice.call("TaskUpdate", {"taskId": task["id"], row.wire: value})
        assert reply.status == 200, reply.body
        assert alice.call("TaskGet", {"taskId": task["id"]}).body["task"][row.wire] == value
        event = Event.objects.filter(board=board, task_number=int(task["id"])).last()
        assert event is not None and row.wire in event.data["fields"]


@pytest.mark.django_db
def test_the_task_dict_has_exactly_the_answer_models_fields(board):
    task = make_task(board, "Shape")
    view = selectors.task_view(board, task.number)
    built = selectors.task_to_dict(view, with_children=True)
    declared = set(answers.Task.model_fields)
    assert set(built) - declared == set(), "keys built but not declared in answers.Task"
    required = {name for name, f in answers.Task.model_fields.items() if f.is_required()}
    assert required - set(built) == set(), "required fields the selector never builds"
    answers.Task.model_validate(built)


@pytest.mark.django_db
def test_a_summary_has_only_fields_the_summary_model_declares(board):
    from boards.core import services

    blocker = make_task(board, "Blocker")
    task = make_task(board, "Summary")
    services.task_update(
        board=board,
        actor="lead",
        task_id=task.number,
        add_blocked_by=[blocker.number],
        priority="urgent",
        labels=["x"],
        active_form="Summing up",
    )
    services.task_update(board=board, actor="lead", task_id=blocker.number, status="failed")
    summary = selectors.task_summary(selectors.task_view(board, task.number))
    declared = set(answers.TaskSummary.model_fields)
    assert {"priority", "labels", "blockedBy"} <= set(summary)
    assert set(summary) - declared == set()
    answers.TaskSummary.model_validate(summary)

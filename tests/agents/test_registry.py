"""One declaration per tool (``@tool`` on its handler) and one error shape (issue 28)."""

from __future__ import annotations

import ast
import re

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from boards.agents import schemas
from boards.agents.answers import Written
from boards.agents.pipeline import listed, lookup
from boards.agents.schemas import Hints, TaskCreateInput, TaskUpdateInput, ToolInput, tool
from boards.core.errors import (
    BODY,
    CONFLICT_DETAILS,
    Conflict,
    ConflictDetails,
    ErrorBody,
    InvalidInput,
    error_body,
)
from devtools.liveserver import ROOT

BOARDS = ROOT / "boards"
CANONICAL = [
    "TaskCreate",
    "TaskGet",
    "TaskUpdate",
    "TaskList",
    "TaskClaim",
    "TaskReassign",
    "TaskBatch",
    "TaskWatch",
    "TaskRequestApproval",
    "InboxRead",
    "TaskHeartbeat",
]


def test_the_canonical_tools_in_their_listed_order():
    assert [t.name for t in listed()] == CANONICAL
    assert [t.name for t in listed("seed003")] == ["tasks"]
    assert len(listed("seed002")) == 6


def test_each_tool_name_is_declared_once_in_the_code():
    code = "\n".join(p.read_text() for p in BOARDS.rglob("*.py"))
    for t in [*listed(), *listed("seed002"), *listed("seed003")]:
        declared = re.findall(rf'\bname="{t.name}"', code)
        assert len(declared) == 1, t.name


def test_a_second_declaration_of_a_name_is_refused():
    with pytest.raises(ValueError, match="declared twice"):
        tool(name="TaskGet", input=TaskCreateInput, answer=Written, hints=Hints("x"))(print)
    with pytest.raises(ValueError, match="answer model and hints"):
        tool(name="NotYetATool", input=TaskCreateInput)(print)
    assert "NotYetATool" not in schemas.TOOLS


def test_descriptions_come_from_the_input_models_docstrings():
    for t in listed():
        assert t.description == schemas.one_paragraph(t.input.__doc__), t.name
        assert "\n" not in t.description and "description" not in t.input_schema()
    # The TaskList example keeps its two spaces, as agents read it.
    assert "Write tests  blocked by: #1" in lookup("TaskList").description


def test_seed_002_namespaces_call_the_declared_tool_with_their_namespace():
    called = lookup("Team7_tasks_claim")
    assert called.name == "Team7_tasks_claim"
    assert called.dialect == "seed002"
    assert called.handler.keywords == {"ns": "Team7"}  # type: ignore[attr-defined]
    assert lookup("board_tasks_watch").waits
    with pytest.raises(Exception, match="Unknown tool"):
        lookup("tasks", seed_dialects=False)


def test_inputs_are_snake_case_for_the_services_and_camel_case_on_the_wire():
    data = TaskUpdateInput.model_validate(
        {"taskId": "#3", "activeForm": "Testing", "usage": {"inputTokens": 5}}
    )
    assert data.model_dump(exclude_unset=True) == {
        "task_id": "3",
        "active_form": "Testing",
        "usage": {"inputTokens": 5},  # the usage mapping the services read, as agents send it
    }
    assert "activeForm" in TaskUpdateInput.model_json_schema()["properties"]
    # Only the published names are accepted: a snake_case one is an unknown field.
    with pytest.raises(ValueError, match="active_form"):
        TaskUpdateInput.model_validate({"taskId": "3", "active_form": "x"})


def test_every_input_model_of_a_canonical_tool_is_camel_case_on_the_wire():
    def fields(schema: dict) -> set[str]:
        names = set(schema.get("properties", {}))
        for inner in schema.get("$defs", {}).values():
            names |= set(inner.get("properties", {}))
        return names

    for t in listed():
        for name in fields(t.input_schema()):
            assert "_" not in name, (t.name, name)


def test_a_field_path_is_spelled_as_the_agent_sent_it():
    assert schemas.wire_path("ops.2.blocked_by") == "ops.2.blockedBy"
    assert schemas.wire_path("usage.cost_usd") == "usage.costUsd"
    assert schemas.wire_path("metadata.parent_id") == "metadata.parent_id"  # the agent's key


def test_a_400_names_the_field_or_lists_nothing():
    assert InvalidInput("subject: must not be empty", field="subject").details == [
        {"field": "subject", "message": "must not be empty"}
    ]
    assert InvalidInput("Cycle", field="blockedBy", cycle=["1", "2"]).details == [
        {"field": "blockedBy", "message": "Cycle", "cycle": ["1", "2"]}
    ]
    assert InvalidInput("Nothing more to say").details == []
    with pytest.raises(TypeError):
        InvalidInput("both", field="a", details=[{"field": "b", "message": "c"}])


def test_every_400_raised_in_the_code_names_its_field():
    """A refusal of input says which field is wrong: ``field=`` or ``details=`` at every
    ``InvalidInput(...)`` (the helpers that build one take the field themselves)."""
    unnamed = []
    for path in BOARDS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            called = isinstance(node, ast.Call) and getattr(node.func, "id", "") == "InvalidInput"
            if called and not {k.arg for k in node.keywords} & {"field", "details"}:
                unnamed.append(f"{path.name}:{node.lineno}")
    assert unnamed == []


def test_409_details_are_checked_against_their_codes_model():
    refusal = Conflict("Task #2 is blocked by #1", code="blocked", details={"blockedBy": ["1"]})
    assert error_body(refusal)["error"]["details"] == {"blockedBy": ["1"]}
    with pytest.raises(ValueError):
        Conflict("x", code="blocked", details={"blockers": ["1"]})
    with pytest.raises(TypeError, match="CONFLICT_DETAILS"):
        Conflict("x", code="owned", details={"owner": "bob"})
    # The union the error schema publishes holds every declared model.
    assert set(ConflictDetails.__args__) == set(CONFLICT_DETAILS.values())  # type: ignore[attr-defined]


def test_the_error_schema_types_details_in_openapi_and_the_output_schemas():
    document = schemas.openapi_document(listed())
    components = document["components"]["schemas"]
    create = document["paths"]["/api/boards/{slug}/tools/TaskCreate"]["post"]["responses"]
    assert create["400"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/InvalidInputError"
    )
    assert create["409"]["content"]["application/json"]["schema"]["$ref"].endswith("/ConflictError")
    assert components["FieldError"]["required"] == ["field", "message"]
    for model in CONFLICT_DETAILS.values():
        assert model.__name__ in components
    for t in listed():
        output = t.output_schema()
        assert output is not None
        error = {**output["$defs"]["ToolError"], "$defs": output["$defs"]}
        Draft202012Validator.check_schema(error)
        refusal = InvalidInput("subject: must not be empty", field="subject")
        Draft202012Validator(error).validate(error_body(refusal))
        blocked = Conflict("blocked", code="blocked", details={"blockedBy": ["1"]})
        Draft202012Validator(error).validate(error_body(blocked))
    assert issubclass(ErrorBody, BaseModel)


def test_the_http_door_answers_the_error_shape(alice):
    for arguments, field in [
        ({"subject": "x", "metadata": {"k": "a\x00b"}}, "metadata.k"),
        ({"subject": "x", "colour": "red"}, "colour"),
        # The service names it blocked_by; the agent reads the name it sent.
        ({"subject": "x", "blockedBy": ["9"]}, "blockedBy"),
        ({"subject": "x", "parentId": "9"}, "parentId"),
    ]:
        reply = alice.call("TaskCreate", arguments)
        assert reply.status == 400, reply.body
        assert reply.error["details"][0]["field"] == field, reply.error
        assert all({"field", "message"} <= set(d) for d in reply.error["details"])
    bare = alice.call("TaskCreate", ["not", "an", "object"])
    assert bare.status == 400
    assert bare.error["details"] == [
        {"field": BODY, "message": "Body must be a JSON object with the tool's input"}
    ]


def test_the_connect_page_lists_the_declared_tools(board, person_client):
    page = person_client.get(f"/boards/{board.slug}/connect/").content.decode()
    for t in listed():
        assert f"<code>{t.name}</code>" in page
        assert t.hints is not None and t.hints.title in page.replace("&#x27;", "'")


def test_tool_input_models_forbid_unknown_fields():
    for t in [*listed(), *listed("seed002"), *listed("seed003")]:
        assert issubclass(t.input, ToolInput)
        assert t.input.model_config.get("extra") == "forbid"

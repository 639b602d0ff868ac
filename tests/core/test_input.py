"""Numbers, days, amounts and JSON bodies from outside are read by one strict parser
(``boards.core.numbers``, ``boards.core.limits.json_problem``) on every door: digits of another
script are refused by name instead of read as another task ("٣" is not task 3) or
answered with a 500 ("²"); years far off, NaN and Infinity, and bodies nested past
any tool's needs are 400s, and a refused input changes nothing (issue #23, item 6).
"""

from __future__ import annotations

import json
import re
from datetime import date
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from channels.testing import HttpCommunicator
from pydantic import TypeAdapter, ValidationError

from boards.agents.schemas import TaskId
from boards.core import limits, numbers, services
from boards.core.errors import InvalidInput
from boards.core.services.boards import BUDGET_MAX
from boards.models import Board, Event, Membership, Role, Task, Webhook
from boards.web.converters import NumberConverter
from boards.webhooks import subscriptions
from tests.support.factories import make_task, make_token

# "²" passes str.isdigit() and int() refuses it; "٣" and "１０" int() reads as 3 and 10.
FOREIGN = ["²", "٣", "１０", "3²", "٣٣"]


def _state(board: Board) -> tuple:
    board.refresh_from_db()
    tasks = Task.objects.filter(board=board).order_by("number")
    return (
        board.last_seq,
        board.budget_usd,
        board.max_attempts,
        list(tasks.values_list("number", "status", "version", "parent_id", "metadata")),
        Event.objects.filter(board=board).count(),
    )


# --- the parser --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "number"),
    [("0", 0), ("3", 3), ("007", 7), ("999999999", 999_999_999), ("1234567890", None)],
)
def test_ascii_digits_spell_a_number_of_bounded_length(text, number):
    assert numbers.spelled(text) == number
    assert numbers.digits(text, field="n") == number


@pytest.mark.parametrize("text", ["", " 3", "3 ", "3\n", "+3", "-3", "1_0", "3.0", "1e3", "0x10"])
def test_anything_but_ascii_digits_spells_no_number(text):
    assert numbers.spelled(text) is None
    assert numbers.digits(text, field="n") is None


@pytest.mark.parametrize("text", FOREIGN)
def test_digits_of_another_script_are_refused_naming_the_field(text):
    assert numbers.spelled(text) is None
    with pytest.raises(InvalidInput) as refused:
        numbers.digits(text, field="after")
    assert refused.value.message == "after: write numbers with the digits 0-9"
    assert refused.value.details == [{"field": "after", "message": numbers.FOREIGN_DIGITS}]


@pytest.mark.parametrize(
    ("value", "number"),
    [("3", 3), ("#3", 3), (" 3 ", 3), (3, 3), (0, 0), (-1, None), (True, None), (10**9, None)],
)
def test_an_id_is_a_number_a_hash_number_or_an_int(value, number):
    assert numbers.id_number(value) == number


SPELLINGS = ["12", "#12", " 12 ", " #12", 12]


@pytest.mark.parametrize("value", SPELLINGS)
def test_a_task_number_is_read_one_way_by_the_tool_input_the_url_and_the_pages(value):
    assert numbers.task_text(value) == "12"
    assert numbers.id_number(value) == 12
    assert TypeAdapter(TaskId).validate_python(value) == "12"
    assert re.fullmatch(NumberConverter.regex, "12")
    assert NumberConverter().to_python("12") == 12


@pytest.mark.parametrize("text", FOREIGN)
def test_a_task_number_in_another_script_is_refused_by_every_reader(text):
    with pytest.raises(ValueError, match=numbers.FOREIGN_DIGITS):
        numbers.task_text(text)
    with pytest.raises(ValidationError, match=numbers.FOREIGN_DIGITS):
        TypeAdapter(TaskId).validate_python(text)
    with pytest.raises(InvalidInput):
        numbers.id_number(text, field="task")


@pytest.mark.parametrize("text", ["0", "101", "-1", "", "1e2", "٣", "99999999999999999999"])
def test_a_whole_number_out_of_its_range_is_refused_naming_the_field(text):
    with pytest.raises(InvalidInput) as refused:
        numbers.whole(text, field="limit", low=1, high=100)
    assert refused.value.message.startswith("limit: ")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("0001-01-01", "today: a date in the years 1970 to 2999"),
        ("9999-12-31", "today: a date in the years 1970 to 2999"),
        ("2026-02-30", "today: a date like 2026-11-20"),
        ("20261120", "today: a date like 2026-11-20"),
        ("2026-W47-1", "today: a date like 2026-11-20"),
        ("２０２６-11-20", "today: write numbers with the digits 0-9"),
    ],
)
def test_days_are_iso_dates_within_a_sane_window(text, problem):
    assert numbers.day("2026-11-20", field="today") == date(2026, 11, 20)
    with pytest.raises(InvalidInput) as refused:
        numbers.day(text, field="today")
    assert refused.value.message == problem


@pytest.mark.parametrize(
    "value",
    [
        *("NaN", "nan", "sNaN", "Infinity", "-Infinity", "inf", "1e3", "", "$5", "٣"),
        *(True, None, [], float("nan"), float("inf"), Decimal("NaN"), Decimal("-Infinity")),
    ],
)
def test_an_amount_is_a_finite_decimal_number(value):
    try:
        assert numbers.amount(value, field="budgetUsd") is None
    except InvalidInput as refused:  # digits of another script are named
        assert refused.message.startswith("budgetUsd: ")
    assert numbers.amount(" 12.50 ", field="x") == Decimal("12.50")
    assert numbers.amount(0.4, field="x") == Decimal("0.4")


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"{}", None),
        (b"[" * 64 + b"]" * 64, None),
        (b"[" * 65 + b"]" * 65, "nested deeper than 64 levels"),
        (b"[" * 50_000, "nested deeper than 64 levels"),
        (b"[]" * 10_000, None),
        (b'{"a": "' + b"[{" * 500 + b'"}', None),  # brackets inside a string are text
        (b'{"a": "\\"' + b"[" * 100 + b'"}', None),  # so are those after an escaped quote
        (b'{"a": "[", "b": ' + b"[" * 65 + b"]" * 65 + b"}", "nested deeper than 64 levels"),
    ],
)
def test_a_json_body_is_scanned_for_depth_before_parsing(body, problem):
    assert limits.json_problem(body) == problem


# --- the tool API -------------------------------------------------------------------------


@pytest.fixture
def three(alice) -> list[dict]:
    return [alice.create(f"Task {n}") for n in (1, 2, 3)]


@pytest.mark.parametrize("text", FOREIGN)
@pytest.mark.parametrize(
    ("op", "field"),
    [
        ({"op": "update", "taskId": "{}", "status": "completed"}, "ops.0.taskId"),
        ({"op": "delete", "taskId": "{}"}, "ops.0.taskId"),
        ({"op": "create", "subject": "x", "blockedBy": ["{}"]}, "ops.0.blockedBy.0"),
        ({"op": "create", "subject": "x", "parentId": "{}"}, "ops.0.parentId"),
        ({"op": "update", "taskId": "1", "addBlockedBy": ["{}"]}, "ops.0.addBlockedBy.0"),
    ],
)
def test_a_batch_refuses_ids_in_another_script_naming_the_field(alice, three, op, field, text):
    before = _state(alice.board)
    body = json.loads(json.dumps(op).replace("{}", text))
    reply = alice.call("TaskBatch", {"ops": [body]})
    assert reply.status == 400, reply.body
    assert {"field": field, "message": f"Value error, {numbers.FOREIGN_DIGITS}"} in (
        reply.error["details"]
    )
    assert _state(alice.board) == before


@pytest.mark.parametrize("tool", ["TaskGet", "TaskUpdate", "TaskClaim", "TaskWatch"])
def test_arabic_indic_three_is_not_task_three(alice, three, tool):
    before = _state(alice.board)
    reply = alice.call(tool, {"taskId": "٣", "timeoutSeconds": 0})
    assert reply.status == 400, reply.body
    assert any(d["field"] == "taskId" for d in reply.error["details"])
    assert _state(alice.board) == before


@pytest.mark.parametrize("depth", [65, 50_000])
def test_a_hook_event_nested_too_deeply_is_refused_before_parsing(alice, depth):
    deep = b"[" * depth + b"]" * depth
    raw = b'{"hook_event_name": "PreToolUse", "session_id": "s1", "tool_input": ' + deep + b"}"
    response = alice.client.post(
        f"/api/boards/{alice.board.slug}/hooks/claude-code",
        data=raw,
        content_type="application/json",
        headers={"Authorization": f"Bearer {alice.token}"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "Body is not valid JSON: nested deeper than 64 levels"
    )


@pytest.mark.parametrize("depth", [65, 50_000])
def test_deep_nesting_is_refused_before_parsing(alice, depth):
    before = _state(alice.board)
    raw = b'{"subject": "x", "metadata": {"k": ' + b"[" * depth + b"]" * depth + b"}}"
    reply = alice.call("TaskCreate", raw=raw)
    assert reply.status == 400 and reply.error["code"] == "invalid_json", reply.body
    assert reply.error["message"] == "Body is not valid JSON: nested deeper than 64 levels"
    assert _state(alice.board) == before


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("after=²", "after"),
        ("after=٣", "after"),
        ("limit=１０", "limit"),
        ("limit=+10", "limit"),
        ("taskId=²", "taskId"),
        ("after=" + "9" * 5000, "after"),
    ],
)
def test_the_event_log_refuses_numbers_it_cannot_read_naming_the_parameter(
    board, person_client, query, field
):
    response = person_client.get(f"/api/boards/team/events?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("range=²", "range"),
        ("range=٣d", "range"),
        ("today=0001-01-01", "today"),
        ("range=30d&today=1970-01-01", None),
        ("today=9999-12-31", "today"),
        ("today=٢٠٢٦-١١-٢٠", "today"),
        ("today=2026-11-20T00:00", "today"),
    ],
)
def test_metrics_refuse_ranges_and_dates_out_of_bounds(board, person_client, query, field):
    response = person_client.get(f"/api/boards/team/metrics?{query}")
    page = person_client.get(f"/boards/team/metrics/?{query}")
    if field is None:  # the edge of the window works
        assert (response.status_code, page.status_code) == (200, 200)
        return
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["field"] == field
    assert page.status_code == 400
    assert f"{field}: " in page.content.decode()


# --- MCP ----------------------------------------------------------------------------------


async def _mcp_post(slug: str, token: str, body: bytes) -> tuple[int, dict]:
    from kanban.asgi import application

    communicator = HttpCommunicator(
        application,
        "POST",
        f"/mcp/{slug}/",
        body=body,
        headers=[
            (b"host", b"localhost"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ],
    )
    response = await communicator.get_response(timeout=10)
    return response["status"], json.loads(response["body"])


DEEP = b"[" * 50_000 + b"]" * 50_000


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "body",
    [
        DEEP,
        # A watch asking for progress: the body is read to choose the answer's form.
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "TaskWatch", '
        b'"arguments": {"taskId": "1", "deep": ' + DEEP + b'}, "_meta": {"progressToken": 1}}}',
    ],
    ids=["bare", "watch-with-progress"],
)
async def test_mcp_answers_a_deeply_nested_body_with_a_json_rpc_parse_error(body):
    board = await database_sync_to_async(services.board_create)(slug="deep")
    token = await database_sync_to_async(make_token)(board, "alice")
    status, answer = await _mcp_post("deep", token, body)
    assert status == 400
    assert answer == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: nested deeper than 64 levels"},
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("text", ["²", "٣"])
async def test_mcp_refuses_a_batch_id_in_another_script_as_a_tool_error(text):
    board = await database_sync_to_async(services.board_create)(slug="mcpdigits")
    token = await database_sync_to_async(make_token)(board, "alice")
    for n in (1, 2, 3):
        await database_sync_to_async(make_task)(board, f"Task {n}")
    ops = [{"op": "update", "taskId": text, "status": "completed"}]
    call = {"name": "TaskBatch", "arguments": {"ops": ops}}
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
    status, answer = await _mcp_post("mcpdigits", token, json.dumps(rpc).encode())
    assert status == 200, answer
    result = answer["result"]
    assert result["isError"] is True
    error = json.loads(result["content"][0]["text"])["error"]
    assert error["code"] == "invalid_input"
    assert error["details"][0]["field"] == "ops.0.taskId"
    statuses = await database_sync_to_async(list)(
        Task.objects.filter(board=board).values_list("status", flat=True)
    )
    assert statuses == ["pending"] * 3


# --- the board's pages --------------------------------------------------------------------


@pytest.fixture
def scene(board, person) -> Board:
    make_token(board, "alice")
    make_task(board, "One")
    make_task(board, "Two", blocked_by=["1"])
    make_task(board, "Three")
    return board


@pytest.mark.parametrize("text", FOREIGN)
@pytest.mark.parametrize(
    "path",
    [
        "/boards/team/activity/?task={}",
        "/boards/team/activity/?after={}",
        "/boards/team/activity/?before={}",
        "/boards/team/graph/?task={}",
        "/boards/team/graph.json?task={}",
    ],
)
def test_page_query_numbers_in_another_script_are_a_400_naming_the_parameter(
    scene, person_client, path, text
):
    response = person_client.get(path.format(text))
    assert response.status_code == 400
    name = path.split("?")[1].split("=")[0]
    assert f"{name}: " in response.content.decode()


@pytest.mark.parametrize("text", FOREIGN)
@pytest.mark.parametrize(
    ("path", "data", "field"),
    [
        ("/boards/team/messages/", {"recipient": "alice", "body": "hi", "task": "{}"}, "task"),
        ("/boards/team/tasks/2/unblock/", {"blocker": "{}"}, "blocked_by"),
        ("/boards/team/settings/", {"maxAttempts": "{}"}, "maxAttempts"),
        ("/boards/team/settings/", {"maxAttempts": "3", "leaseSeconds": "{}"}, "leaseSeconds"),
        ("/boards/team/settings/", {"maxAttempts": "3", "budgetUsd": "{}"}, "budgetUsd"),
    ],
)
def test_forms_refuse_numbers_in_another_script_naming_the_field_and_change_nothing(
    scene, person_client, path, data, field, text
):
    before = _state(scene)
    filled = {name: value.format(text) for name, value in data.items()}
    response = person_client.post(path, filled, headers={"HX-Request": "true"})
    assert response.status_code == 400, response.content
    assert field in response.content.decode()
    assert _state(scene) == before


@pytest.mark.parametrize(
    "budget", ["NaN", "nan", "sNaN", "Infinity", "-Infinity", "1e999999", "9" * 5000]
)
def test_a_budget_of_nan_or_infinity_is_refused_naming_the_field(scene, person_client, budget):
    before = _state(scene)
    response = person_client.post(
        "/boards/team/settings/", {"maxAttempts": "3", "budgetUsd": budget}
    )
    assert response.status_code == 400
    assert "Budget: dollars from 0 to" in response.content.decode()
    assert _state(scene) == before


@pytest.mark.parametrize("budget", [float("nan"), float("inf"), Decimal("NaN"), Decimal("sNaN")])
def test_the_settings_service_refuses_a_budget_that_is_no_number(board, budget):
    with pytest.raises(InvalidInput) as refused:
        services.board_settings(board=board, actor="pat", budgetUsd=budget)
    assert refused.value.details == [
        {
            "field": "budgetUsd",
            "message": f"dollars from 0 to {BUDGET_MAX} (like 250 or 99.50), or empty for no budget",
        }
    ]


def test_a_board_setting_in_ascii_digits_is_still_saved(scene, person_client):
    response = person_client.post(
        "/boards/team/settings/", {"maxAttempts": " 5 ", "budgetUsd": "$12.50"}
    )
    assert response.status_code == 302
    scene.refresh_from_db()
    assert (scene.max_attempts, scene.budget_usd) == (5, Decimal("12.50"))


@pytest.mark.parametrize("hook", ["²", "٣", "-1", "", "9" * 5000])
@pytest.mark.parametrize("action", ["pause", "rotate", "remove", "test"])
def test_webhook_actions_refuse_an_id_they_cannot_read(scene, person_client, action, hook):
    subscriptions.webhook_add(board=scene, actor="pat", url="https://example.com/hook", kinds=[])
    before = (_state(scene), list(Webhook.objects.values_list("pk", "active", "secret")))
    response = person_client.post("/boards/team/webhooks/", {"action": action, "webhook": hook})
    assert response.status_code == 400
    assert (_state(scene), list(Webhook.objects.values_list("pk", "active", "secret"))) == before


def test_the_foreign_digit_refusals_reach_a_viewer_too(scene, django_user_model):
    from django.test import Client

    viewer = django_user_model.objects.create_user("vic", password="pw-vic-1234")
    Membership.objects.create(board=scene, user=viewer, role=Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    assert client.get("/boards/team/graph.json?task=٣").status_code == 400
    assert client.get("/boards/team/graph.json?task=3").status_code == 200


# --- NUL, which PostgreSQL cannot even compare ----------------------------------------------


@pytest.mark.parametrize("path", ["/boards/team/activity/", "/api/boards/team/events"])
@pytest.mark.parametrize("name", ["actor", "kind"])
def test_a_filter_holding_nul_matches_nothing(scene, person_client, path, name):
    response = person_client.get(path, {name: "a\x00b"})
    assert response.status_code == 200
    if path.startswith("/api/"):
        assert response.json()["events"] == []


@pytest.mark.parametrize(
    "data",
    [{"username": "sam\x00", "role": "viewer"}, {"remove": "pat\x00"}, {"remove_agent": "\x00"}],
)
def test_member_forms_refuse_nul_naming_the_field(scene, person_client, data):
    before = (_state(scene), list(Membership.objects.values_list("user_id", "role")))
    response = person_client.post("/boards/team/members/", data)
    assert response.status_code == 400
    assert "must not contain the NUL character" in response.content.decode()
    assert (_state(scene), list(Membership.objects.values_list("user_id", "role"))) == before


@pytest.mark.parametrize("rule", ["²", "٣", "", "0", "999999", "9" * 5000, "\x00"])
def test_removing_a_gate_rule_that_is_not_there_is_a_refusal_not_a_500(scene, person_client, rule):
    before = _state(scene)
    response = person_client.post("/boards/team/gates/", {"remove": rule})
    assert 400 <= response.status_code < 500
    assert "remove" in response.content.decode() or "rule" in response.content.decode()
    assert _state(scene) == before

"""TaskBatch: all or nothing, refs between creates, exact errors (SPEC §3 rule 2, seed 003)."""

from boards.models import Event, Task


def test_batch_creates_with_refs_and_dependencies(alice):
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "create", "ref": "goal", "subject": "Refactor parser"},
                {"op": "create", "ref": "read", "subject": "Read module", "parentId": "goal"},
                {
                    "op": "create",
                    "ref": "tests",
                    "subject": "Write tests",
                    "parentId": "goal",
                    "blockedBy": ["read"],
                },
                {
                    "op": "create",
                    "subject": "Run verification",
                    "parentId": "goal",
                    "blockedBy": ["tests"],
                },
            ]
        },
    )
    assert reply.status == 200, reply.body
    assert reply.body["operations"] == [
        {"op": "create", "taskId": "1", "ref": "goal"},
        {"op": "create", "taskId": "2", "ref": "read"},
        {"op": "create", "taskId": "3", "ref": "tests"},
        {"op": "create", "taskId": "4"},
    ]
    assert reply.body["counts"]["blocked"] == 2
    assert alice.call("TaskGet", {"taskId": "4"}).body["task"]["blockedBy"] == ["3"]


def test_batch_may_reference_a_later_create(alice):
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "create", "subject": "Second", "blockedBy": ["first"]},
                {"op": "create", "ref": "first", "subject": "First"},
            ]
        },
    )
    assert reply.status == 200
    assert alice.call("TaskGet", {"taskId": "1"}).body["task"]["blockedBy"] == ["2"]


def test_batch_rejects_a_cycle_with_the_exact_message_and_changes_nothing(alice, board):
    alice.create("One")
    alice.create("Two")
    before = Event.objects.filter(board=board).count()
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "create", "ref": "a", "subject": "Three", "blockedBy": ["b"]},
                {"op": "create", "ref": "b", "subject": "Four"},
                {"op": "create", "ref": "c", "subject": "Five", "blockedBy": ["a"]},
                {"op": "update", "taskId": "b", "addBlockedBy": ["c"]},
            ]
        },
    )
    assert reply.status == 400
    assert reply.error["message"] == "Cycle detected: 3 → 4 → 5 → 3"
    assert Task.objects.count() == 2
    assert Event.objects.filter(board=board).count() == before
    assert alice.create("Next")["id"] == "3"


def test_batch_rejects_an_unknown_reference_with_the_exact_message(alice):
    alice.create("One")
    reply = alice.call(
        "TaskBatch",
        {"ops": [{"op": "create", "subject": "Two", "blockedBy": ["1", "99"]}]},
    )
    assert reply.status == 400
    assert reply.error["message"] == "Task #2: blocked_by references unknown task #99"
    assert Task.objects.count() == 1


def test_batch_update_and_delete_are_atomic_with_creates(alice):
    alice.create("Old")
    alice.create("Doomed")
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "update", "taskId": "1", "status": "completed", "result": "done"},
                {"op": "delete", "taskId": "2"},
                {"op": "create", "subject": "New", "blockedBy": ["1"]},
            ]
        },
    )
    assert reply.status == 200
    assert [o["op"] for o in reply.body["operations"]] == ["update", "delete", "create"]
    new = alice.call("TaskGet", {"taskId": "3"}).body["task"]
    assert new["blocked"] is False


def test_a_failing_operation_rolls_back_the_earlier_ones(alice):
    alice.create("Keep me pending")
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "update", "taskId": "1", "status": "completed"},
                {"op": "update", "taskId": "42", "notes": "x"},
            ]
        },
    )
    assert reply.status == 404
    assert Task.objects.get(number=1).status == "pending"


def test_batch_validation_names_the_wrong_operation_field(alice):
    reply = alice.call("TaskBatch", {"ops": [{"op": "create", "subject": "ok"}, {"op": "create"}]})
    assert reply.status == 400
    assert {"field": "ops.1.subject", "message": "Field required"} in reply.error["details"]


def test_duplicate_refs_are_rejected(alice):
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "create", "ref": "x", "subject": "A"},
                {"op": "create", "ref": "x", "subject": "B"},
            ]
        },
    )
    assert reply.status == 400
    assert "ref" in reply.error["message"]
    assert Task.objects.count() == 0

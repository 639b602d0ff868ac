"""TaskCreate / TaskGet / TaskUpdate / TaskList through the HTTP tool endpoint (SPEC §3, §4)."""

from boards.models import Board, Event, Task


def test_create_numbers_tasks_from_one_and_records_the_caller(alice):
    first = alice.create("Set up database", activeForm="Setting up database")
    second = alice.create("Write API")
    assert (first["id"], second["id"]) == ("1", "2")
    assert first["status"] == "pending"
    assert first["createdBy"] == "alice"
    assert first["owner"] == ""
    assert first["activeForm"] == "Setting up database"


def test_create_answers_task_and_changes(alice):
    reply = alice.call("TaskCreate", {"subject": "Fix auth bug"})
    assert reply.status == 200
    assert reply.body["changes"] == [{"type": "created", "taskId": "1"}]
    assert reply.body["unreadMessages"] == 0


def test_get_returns_both_directions_of_dependencies_and_children(alice):
    alice.create("Goal")
    alice.create("Step", parentId="1")
    alice.create("Later", blockedBy=["2"])
    step = alice.call("TaskGet", {"taskId": "2"}).body["task"]
    assert step["blocks"] == ["3"]
    assert step["parentId"] == "1"
    goal = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert goal["children"] == ["2"]
    later = alice.call("TaskGet", {"taskId": "3"}).body["task"]
    assert later["blockedBy"] == ["2"]
    assert later["blocked"] is True


def test_get_accepts_a_number_or_hash_prefixed_id(alice):
    alice.create("One")
    assert alice.call("TaskGet", {"taskId": 1}).body["task"]["id"] == "1"
    assert alice.call("TaskGet", {"taskId": "#1"}).body["task"]["id"] == "1"


def test_get_unknown_task_is_404(alice):
    reply = alice.call("TaskGet", {"taskId": "99"})
    assert reply.status == 404
    assert reply.error["code"] == "task_not_found"
    assert reply.error["message"] == "Task #99 not found"


def test_ids_are_never_reused_after_a_delete(alice):
    alice.create("One")
    alice.create("Two")
    assert alice.call("TaskUpdate", {"taskId": "2", "status": "deleted"}).status == 200
    assert alice.create("Three")["id"] == "3"
    assert alice.call("TaskGet", {"taskId": "2"}).status == 404


def test_update_bumps_version_and_records_an_event(alice, board):
    alice.create("One")
    reply = alice.call("TaskUpdate", {"taskId": "1", "description": "More words"})
    assert reply.status == 200
    assert reply.body["task"]["version"] == 2
    assert reply.body["changes"] == [{"type": "updated", "taskId": "1", "fields": ["description"]}]
    kinds = list(Event.objects.filter(board=board).order_by("seq").values_list("kind", flat=True))
    assert kinds == ["board_created", "created", "updated"]


def test_update_with_nothing_new_changes_nothing(alice):
    alice.create("One")
    reply = alice.call("TaskUpdate", {"taskId": "1", "subject": "One"})
    assert reply.body["task"]["version"] == 1
    assert reply.body["changes"] == []


def test_metadata_merges_key_by_key_and_null_removes(alice):
    alice.create("One", metadata={"a": 1, "b": "x"})
    reply = alice.call("TaskUpdate", {"taskId": "1", "metadata": {"b": None, "c": True}})
    assert reply.body["task"]["metadata"] == {"a": 1, "c": True}


def test_stale_expected_version_is_409_with_the_current_task(alice):
    alice.create("One")
    alice.call("TaskUpdate", {"taskId": "1", "notes": "first"})
    reply = alice.call("TaskUpdate", {"taskId": "1", "notes": "second", "expectedVersion": 1})
    assert reply.status == 409
    assert reply.error["code"] == "stale_version"
    assert reply.error["details"]["task"]["notes"] == "first"
    assert Task.objects.get(number=1).notes == "first"


def test_matching_expected_version_applies(alice):
    alice.create("One")
    reply = alice.call("TaskUpdate", {"taskId": "1", "notes": "n", "expectedVersion": 1})
    assert reply.status == 200
    assert reply.body["task"]["version"] == 2


def test_completing_a_blocker_auto_unblocks_and_reopening_blocks_again(alice):
    alice.create("Blocker")
    alice.create("Dependent", blockedBy=["1"])
    done = alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert {"type": "auto_unblock", "taskId": "2"} in done.body["changes"]
    assert alice.call("TaskGet", {"taskId": "2"}).body["task"]["blocked"] is False
    reopened = alice.call("TaskUpdate", {"taskId": "1", "status": "pending"})
    assert {"type": "auto_block", "taskId": "2"} in reopened.body["changes"]
    assert alice.call("TaskGet", {"taskId": "2"}).body["task"]["blocked"] is True


def test_deleting_a_blocker_removes_its_edges_and_unblocks(alice):
    alice.create("Blocker")
    alice.create("Dependent", blockedBy=["1"])
    reply = alice.call("TaskUpdate", {"taskId": "1", "status": "deleted"})
    assert reply.body["task"] is None
    assert reply.body["changes"] == [
        {"type": "deleted", "taskId": "1"},
        {"type": "auto_unblock", "taskId": "2"},
    ]
    assert alice.call("TaskGet", {"taskId": "2"}).body["task"]["blockedBy"] == []


def test_failed_blocker_keeps_dependents_blocked(alice):
    alice.create("Blocker")
    alice.create("Dependent", blockedBy=["1"])
    reply = alice.call("TaskUpdate", {"taskId": "1", "status": "failed"})
    assert not any(c["type"] == "auto_unblock" for c in reply.body["changes"])
    assert alice.call("TaskGet", {"taskId": "2"}).body["task"]["blocked"] is True


def test_moving_a_blocked_task_to_in_progress_fails_like_a_claim(alice):
    alice.create("Blocker")
    alice.create("Dependent", blockedBy=["1"])
    reply = alice.call("TaskUpdate", {"taskId": "2", "status": "in_progress"})
    assert reply.status == 409
    assert reply.error == {
        "code": "blocked",
        "message": "Task #2 is blocked by #1",
        "details": {"blockedBy": ["1"]},
    }


def test_self_reference_is_rejected(alice):
    alice.create("One")
    reply = alice.call("TaskUpdate", {"taskId": "1", "addBlockedBy": ["1"]})
    assert reply.status == 400
    assert reply.error["message"] == "Task #1: blocked_by cannot reference the task itself"


def test_unknown_blocker_is_rejected_with_the_exact_message(alice):
    alice.create("One")
    reply = alice.call("TaskUpdate", {"taskId": "1", "addBlockedBy": ["99"]})
    assert reply.status == 400
    assert reply.error["message"] == "Task #1: blocked_by references unknown task #99"


def test_a_cycle_through_update_is_rejected_and_nothing_changes(alice):
    alice.create("A")
    alice.create("B", blockedBy=["1"])
    alice.create("C", blockedBy=["2"])
    reply = alice.call("TaskUpdate", {"taskId": "1", "addBlockedBy": ["3"], "notes": "x"})
    assert reply.status == 400
    assert reply.error["code"] == "cycle"
    assert reply.error["message"] == "Cycle detected: 1 → 3 → 2 → 1"
    one = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert one["blockedBy"] == [] and one["notes"] == ""


def test_remove_blocked_by_and_add_blocks(alice):
    alice.create("A")
    alice.create("B", blockedBy=["1"])
    alice.create("C")
    reply = alice.call("TaskUpdate", {"taskId": "2", "removeBlockedBy": ["1"], "addBlocks": ["3"]})
    assert reply.status == 200
    assert reply.body["task"]["blockedBy"] == [] and reply.body["task"]["blocks"] == ["3"]
    assert alice.call("TaskGet", {"taskId": "3"}).body["task"]["blockedBy"] == ["2"]


def test_parent_can_be_set_and_cleared_but_not_made_circular(alice):
    alice.create("Root")
    alice.create("Child", parentId="1")
    circular = alice.call("TaskUpdate", {"taskId": "1", "parentId": "2"})
    assert circular.status == 400
    assert circular.error["code"] == "cycle"
    cleared = alice.call("TaskUpdate", {"taskId": "2", "parentId": None})
    assert cleared.body["task"]["parentId"] is None


def test_list_views_and_counts(alice):
    alice.create("A")
    alice.create("B", blockedBy=["1"])
    alice.create("C")
    alice.call("TaskClaim", {"taskId": "3"})
    reply = alice.call("TaskList", {})
    assert reply.body["total"] == 3
    assert reply.body["counts"] == {
        "pending": 1,
        "in_progress": 1,
        "blocked": 1,
        "completed": 0,
        "failed": 0,
        "cancelled": 0,
        "ready": 1,
        "stuck": 0,
    }

    def ids(**body):
        return [t["id"] for t in alice.call("TaskList", body).body["tasks"]]

    assert ids(view="ready") == ["1"]
    assert ids(view="blocked") == ["2"]
    assert ids(view="in_progress") == ["3"]
    assert ids(view="open") == ["1", "2", "3"]
    assert ids(view="done") == []
    assert ids(owner="alice") == ["3"]
    assert ids(blocked=False) == ["1", "3"]
    assert ids(status="pending") == ["1", "2"]


def test_list_with_an_empty_body_means_all(alice):
    alice.create("A")
    reply = alice.call("TaskList")
    assert reply.status == 200
    assert reply.body["total"] == 1


def test_tree_orders_children_under_parents_with_depth(alice):
    alice.create("Refactor parser")
    alice.create("Unrelated")
    alice.create("Read module", parentId="1")
    alice.create("Write tests", parentId="1")
    alice.create("Fixture", parentId="4")
    tasks = alice.call("TaskList", {"tree": True}).body["tasks"]
    assert [(t["id"], t["depth"]) for t in tasks] == [
        ("1", 0),
        ("3", 1),
        ("4", 1),
        ("5", 2),
        ("2", 0),
    ]
    sub = alice.call("TaskList", {"parentId": "1"}).body["tasks"]
    assert [t["id"] for t in sub] == ["3", "4"]


def test_reset_deletes_every_task_and_restarts_numbering(alice, board):
    from boards.core import services

    alice.create("A")
    alice.create("B")
    services.board_reset(board=board, actor="pat")
    assert alice.call("TaskList").body["total"] == 0
    assert alice.create("Fresh")["id"] == "1"
    assert Board.objects.get(pk=board.pk).task_counter == 1


def test_deleting_a_blocked_task_hands_its_open_blockers_to_what_waits_on_it(alice):
    alice.create("A")
    alice.create("B", blockedBy=["1"])
    alice.create("C", blockedBy=["2"])

    reply = alice.call("TaskUpdate", {"taskId": "2", "status": "deleted"})

    assert reply.status == 200, reply.body
    assert reply.body["changes"] == [
        {
            "type": "updated",
            "taskId": "3",
            "fields": ["addBlockedBy"],
            "inheritedBlockedBy": ["1"],
            "inheritedFrom": "2",
        },
        {"type": "deleted", "taskId": "2"},
    ]
    task = alice.call("TaskGet", {"taskId": "3"}).body["task"]
    assert task["blocked"] is True and task["blockedBy"] == ["1"]
    # Once A is done, C is released as any dependent is.
    done = alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert {"type": "auto_unblock", "taskId": "3"} in done.body["changes"]


def test_deleting_a_blocked_task_in_a_batch_passes_its_blockers_on_too(alice):
    alice.create("A")
    alice.create("B", blockedBy=["1"])
    alice.create("C", blockedBy=["2"])
    alice.create("D", blockedBy=["1", "2"])  # already waits on A: nothing to inherit

    reply = alice.call("TaskBatch", {"ops": [{"op": "delete", "taskId": "2"}]})

    assert reply.status == 200, reply.body
    inherited = [c for c in reply.body["changes"] if c.get("inheritedFrom") == "2"]
    assert [c["taskId"] for c in inherited] == ["3"]
    assert alice.call("TaskGet", {"taskId": "4"}).body["task"]["blockedBy"] == ["1"]
    assert alice.call("TaskGet", {"taskId": "3"}).body["task"]["blocked"] is True

"""The seeds' own examples, replayed through the HTTP tool API."""


def test_seed_000_diamond_unblocks_step_by_step(alice):
    # #1 blocks #2 and #3; both block #4.
    alice.create("Set up database")
    alice.create("Create API")
    alice.create("Add auth")
    alice.create("Integration tests")
    alice.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    alice.call("TaskUpdate", {"taskId": "3", "addBlockedBy": ["1"]})
    alice.call("TaskUpdate", {"taskId": "4", "addBlockedBy": ["2", "3"]})

    def blocked():
        return {t["id"]: t["blocked"] for t in alice.call("TaskList").body["tasks"]}

    assert blocked() == {"1": False, "2": True, "3": True, "4": True}
    first = alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert [c["taskId"] for c in first.body["changes"] if c["type"] == "auto_unblock"] == ["2", "3"]
    assert blocked() == {"1": False, "2": False, "3": False, "4": True}
    second = alice.call("TaskUpdate", {"taskId": "2", "status": "completed"})
    assert not [c for c in second.body["changes"] if c["type"] == "auto_unblock"]
    assert blocked()["4"] is True
    third = alice.call("TaskUpdate", {"taskId": "3", "status": "completed"})
    assert [c["taskId"] for c in third.body["changes"] if c["type"] == "auto_unblock"] == ["4"]
    assert blocked()["4"] is False
    counts = alice.call("TaskList").body["counts"]
    assert (counts["completed"], counts["pending"]) == (3, 1)


def test_seed_004_example_and_its_text_rendering(alice):
    alice.create("Set up database")
    alice.create("Write API endpoints")
    alice.create("Write tests")
    alice.call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})
    alice.call("TaskUpdate", {"taskId": "3", "addBlockedBy": ["1", "2"]})
    alice.call("TaskClaim", {"taskId": "1"})
    text = alice.call("TaskList", {"format": "text"}).body["text"]
    assert text == (
        "#1. [>] Set up database  @alice\n"
        "#2. [ ] Write API endpoints  blocked by: #1\n"
        "#3. [ ] Write tests  blocked by: #1, #2"
    )
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    text = alice.call("TaskList", {"format": "text"}).body["text"]
    assert text == (
        "#1. [x] Set up database  @alice\n"
        "#2. [ ] Write API endpoints\n"
        "#3. [ ] Write tests  blocked by: #2"
    )
    two = alice.call("TaskGet", {"taskId": "1"}).body["task"]
    assert two["blocks"] == ["2", "3"]


def test_seed_003_batch_rejected_for_a_cycle(alice):
    alice.create("One")
    alice.create("Two")
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "create", "ref": "three", "subject": "Three", "blockedBy": ["five"]},
                {"op": "create", "ref": "four", "subject": "Four"},
                {"op": "create", "ref": "five", "subject": "Five", "blockedBy": ["three"]},
            ]
        },
    )
    assert reply.status == 400
    assert reply.error == {
        "code": "cycle",
        "message": "Cycle detected: 3 → 5 → 3",
        "details": [
            {"field": "blockedBy", "message": "Cycle detected: 3 → 5 → 3", "cycle": ["3", "5", "3"]}
        ],
    }
    assert alice.call("TaskList").body["total"] == 2


def test_seed_003_batch_rejected_for_an_unknown_reference(alice):
    reply = alice.call(
        "TaskBatch",
        {
            "ops": [
                {"op": "create", "subject": "One"},
                {"op": "create", "subject": "Two", "blockedBy": ["99"]},
            ]
        },
    )
    assert reply.status == 400
    assert reply.error["message"] == "Task #2: blocked_by references unknown task #99"
    assert alice.call("TaskList").body["total"] == 0


def test_seed_002_claim_rules_reassign_and_metadata_merge(alice, bob):
    alice.create("Blocker")
    alice.create("Work", blockedBy=["1"], metadata={"priority": "high", "size": 3})
    assert bob.call("TaskClaim", {"taskId": "2"}).status == 409  # blocked
    bob.call("TaskClaim", {"taskId": "1"})
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 409  # owned by another
    assert bob.call("TaskClaim", {"taskId": "1"}).body["changes"] == []  # owner: no-op
    bob.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 409  # terminal
    alice.call("TaskClaim", {"taskId": "2"})
    moved = alice.call("TaskReassign", {"taskId": "2", "owner": "bob"}).body["task"]
    assert moved["owner"] == "bob"
    merged = bob.call("TaskUpdate", {"taskId": "2", "metadata": {"size": None, "reviewed": True}})
    assert merged.body["task"]["metadata"] == {"priority": "high", "reviewed": True}
    listed = alice.call("TaskList", {"owner": "bob", "view": "open", "blocked": False}).body[
        "tasks"
    ]
    assert [t["id"] for t in listed] == ["2"]

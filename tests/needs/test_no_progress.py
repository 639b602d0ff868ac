"""``no_progress`` (SPEC §12): work held far past the board's usual cycle time (3 × its
p90, at least 10 minutes), and a client session sending the same tool call ten times in a
row, need a person; the sweeper records the first, the hook door the second."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from boards.clients import sessions
from boards.core.rules import NO_PROGRESS_FLOOR, REPEATS_NO_PROGRESS, no_progress_after
from boards.models import Attempt, ClientSession, Event, Message, Task
from boards.needs import decisions
from tests.clients.test_hooks import bash, hook, send
from tests.support.factories import make_token


@pytest.fixture(autouse=True)
def measure_afresh():
    """The sweeper remembers each board's cycle for a minute; boards' ids repeat between
    tests."""
    decisions._CYCLES.clear()
    yield
    decisions._CYCLES.clear()


@pytest.fixture
def claude(board) -> str:
    return make_token(board, "claude")


def after(minutes: float) -> timezone.datetime:
    return timezone.now() + timedelta(minutes=minutes)


def inbox(client: Client) -> dict:
    response = client.get("/api/inbox")
    assert response.status_code == 200
    return response.json()


def test_the_threshold_is_three_usual_cycles_and_never_under_ten_minutes():
    assert no_progress_after(None) == NO_PROGRESS_FLOOR == timedelta(minutes=10)
    assert no_progress_after(60) == timedelta(minutes=10)
    assert no_progress_after(3600) == timedelta(hours=3)


def test_work_held_past_the_floor_needs_a_person_until_it_is_finished(alice, board, person_client):
    alice.create("Quick one")
    alice.create("The long one")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    assert alice.call("TaskUpdate", {"taskId": "1", "status": "completed"}).status == 200
    assert alice.call("TaskClaim", {"taskId": "2"}).status == 200

    # The board's usual cycle is a moment: the floor holds.
    assert decisions.needs_sweep(now=after(9)) == 0
    assert Task.objects.get(board=board, number=2).needs == ""
    assert decisions.needs_sweep(now=after(11)) == 1
    assert Task.objects.get(board=board, number=2).needs == "no_progress"
    event = Event.objects.get(board=board, kind="needs_attention")
    assert (event.task_number, event.data["reason"]) == (2, "no_progress")

    [item] = inbox(person_client)["items"]
    assert (item["reason"], item["taskId"], item["agent"]) == ("no_progress", "2", "alice")
    assert item["recommended"]["action"] == "message"
    assert [a["action"] for a in item["actions"]] == ["release", "open"]
    page = person_client.get("/boards/team/").content.decode()
    assert "has made no progress for a long while" in page

    # The agent's calls do not end it (it still holds the same work); a second sweep
    # records nothing twice.
    assert alice.call("TaskHeartbeat", {"taskId": "2"}).status == 200
    assert Task.objects.get(board=board, number=2).needs == "no_progress"
    assert decisions.needs_sweep(now=after(12)) == 0
    assert Event.objects.filter(board=board, kind="needs_attention").count() == 1

    # Finishing it does.
    assert alice.call("TaskUpdate", {"taskId": "2", "status": "completed"}).status == 200
    assert Task.objects.get(board=board, number=2).needs == ""
    assert inbox(person_client)["count"] == 0


def test_a_board_whose_work_takes_an_hour_waits_three_hours(alice, board):
    for n in range(1, 11):
        alice.create(f"Slow {n}")
        assert alice.call("TaskClaim", {"taskId": str(n)}).status == 200
        assert alice.call("TaskUpdate", {"taskId": str(n), "status": "completed"}).status == 200
    # As if each had taken an hour (the clock cannot be wound in a test).
    Attempt.objects.filter(task__board=board).update(seconds=3600)
    alice.create("Held")
    assert alice.call("TaskClaim", {"taskId": "11"}).status == 200

    assert decisions.needs_sweep(now=after(120)) == 0
    assert Task.objects.get(board=board, number=11).needs == ""
    assert decisions.needs_sweep(now=after(181)) == 1
    assert Task.objects.get(board=board, number=11).needs == "no_progress"


def test_release_answers_no_progress_and_the_old_owner_loses_its_lease(alice, board, person_client):
    alice.create("Held")
    assert alice.call("TaskClaim", {"taskId": "1"}).status == 200
    decisions.needs_sweep(now=after(11))
    task = Task.objects.get(board=board, number=1)
    response = person_client.post(
        "/boards/team/tasks/1/release/", {"version": task.version, "note": "stuck?"}
    )
    assert response.status_code in (200, 302)
    task.refresh_from_db()
    assert (task.status, task.owner, task.needs) == ("pending", "", "")
    answer = alice.call("TaskUpdate", {"taskId": "1", "status": "completed"})
    assert (answer.status, answer.body["error"]["code"]) == (409, "lease_lost")


def test_a_session_sending_the_same_call_ten_times_needs_a_person_until_it_changes(
    board, claude, person_client
):
    send(claude, hook("SessionStart"))
    for n in range(REPEATS_NO_PROGRESS - 1):
        assert send(claude, bash("cat out.log", use=f"tu-{n}"))[0] == 200
    assert inbox(person_client)["count"] == 0
    assert not Event.objects.filter(board=board, kind="needs_attention").exists()

    assert send(claude, bash("cat out.log", use="tu-last"))[0] == 200
    session = ClientSession.objects.get(board=board)
    assert session.repeats == REPEATS_NO_PROGRESS
    event = Event.objects.get(board=board, kind="needs_attention")
    assert (event.actor, event.data["reason"], event.data["repeats"]) == (
        "claude",
        "no_progress",
        REPEATS_NO_PROGRESS,
    )
    [item] = inbox(person_client)["items"]
    assert (item["reason"], item["taskId"], item["agent"]) == ("no_progress", None, "claude")
    assert "sent the same tool call 10 times in a row" in item["question"]
    assert item["recommended"]["action"] == "message"

    # The Message action sends the note to the session's agent.
    response = person_client.post(
        item["recommended"]["url"],
        {"recipient": "claude", "note": "You are looping on cat; read the error instead."},
    )
    assert response.status_code in (200, 302)
    assert Message.objects.get(board=board, recipient="claude").body.startswith("You are looping")

    # An eleventh of the same records nothing new; another call ends the loop.
    send(claude, bash("cat out.log", use="tu-11"))
    assert Event.objects.filter(board=board, kind="needs_attention").count() == 1
    send(claude, bash("ls", use="tu-12"))
    assert ClientSession.objects.get(board=board).repeats == 1
    assert inbox(person_client)["count"] == 0


def test_the_same_tool_with_another_input_is_not_a_loop(board, claude, person_client):
    send(claude, hook("SessionStart"))
    for n in range(REPEATS_NO_PROGRESS + 2):
        send(claude, bash(f"cat part-{n % 2}.log", use=f"tu-{n}"))
    assert ClientSession.objects.get(board=board).repeats == 1
    assert inbox(person_client)["count"] == 0


def test_a_loop_noticed_on_a_stale_read_is_still_recorded_on_the_board(
    board, claude, person_client, monkeypatch
):
    """Parallel calls of one session can make the door's early read stale: the loop's
    event is written all the same, under the board's lock."""
    send(claude, hook("SessionStart"))
    monkeypatch.setattr(sessions, "_loop_turns", lambda *args: False)
    for n in range(REPEATS_NO_PROGRESS):
        assert send(claude, bash("cat out.log", use=f"tu-{n}"))[0] == 200
    event = Event.objects.get(board=board, kind="needs_attention")
    assert event.data["reason"] == "no_progress"
    send(claude, bash("ls", use="tu-other"))  # the loop ends: the strip hears of it
    assert inbox(person_client)["count"] == 0


def test_a_looping_session_that_then_waits_for_its_person_is_one_no_progress_item(
    board, claude, person_client
):
    send(claude, hook("SessionStart"))
    for n in range(REPEATS_NO_PROGRESS):
        send(claude, bash("cat out.log", use=f"tu-{n}"))
    send(claude, hook("Notification", message="Claude needs your permission to use Bash"))
    assert ClientSession.objects.get(board=board).state == "waiting"
    assert [i["reason"] for i in inbox(person_client)["items"]] == ["no_progress"]


def test_the_person_stepping_in_ends_the_loop_and_the_strip_hears_of_it(
    board, claude, person_client, published, django_capture_on_commit_callbacks
):
    send(claude, hook("SessionStart"))
    for n in range(REPEATS_NO_PROGRESS):
        send(claude, bash("cat out.log", use=f"tu-{n}"))
    assert inbox(person_client)["count"] == 1
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        send(claude, hook("UserPromptSubmit", prompt="Stop reading the log; fix the test"))
    assert ClientSession.objects.get(board=board).repeats == 0
    assert inbox(person_client)["count"] == 0
    # The board's header (the strip) was re-rendered.
    assert any(p.header for p in published if p.board_id == board.pk)

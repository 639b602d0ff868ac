"""Flow metrics and cost (issue 16) on a board built from a scripted history: the exact
numbers, worked out by hand in the comments."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from boards import services
from boards.metrics import metrics, percentile
from boards.models import Attempt, Event, Task, Usage
from tests.test_leases import lapse


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


@pytest.fixture
def history(board, alice, bob):
    for subject in ("Plan", "Build", "Test", "Later"):
        alice.create(subject)
    alice.call("TaskUpdate", {"taskId": "3", "parentId": "4"})
    alice.call("TaskClaim", {"taskId": "1"})
    alice.call("TaskUpdate", {"taskId": "1", "status": "completed", "usage": {"costUsd": 0.5}})
    bob.call("TaskClaim", {"taskId": "2"})
    bob.call("TaskUpdate", {"taskId": "2", "status": "failed"})
    alice.call("TaskClaim", {"taskId": "3"})
    lapse(board, 3)
    assert services.leases_sweep() == 1
    bob.call("TaskClaim", {"taskId": "3"})
    bob.call("TaskUpdate", {"taskId": "3", "status": "completed", "usage": {"costUsd": 0.25}})
    # The clock of that history, event by event (seq order), then tasks, attempts, usage.
    times = {
        "board_created": at(16, 9),
        ("created", 1): at(18, 9),
        ("created", 2): at(18, 9, 30),
        ("created", 3): at(18, 10),
        ("created", 4): at(17, 12),  # before the window
        ("updated", 3): at(18, 10, 30),
        ("claimed", 1): at(18, 10),
        ("status", 1): at(18, 13),
        ("claimed", 2): at(19, 9),
        ("status", 2): at(19, 10),
        ("reclaimed", 3): at(19, 9),
        ("status", 3): at(20, 10),
    }
    claims_of_3 = iter([at(19, 8), at(20, 8)])
    for event in Event.objects.filter(board=board).order_by("seq"):
        if event.kind == "board_created":
            when = times["board_created"]
        elif (event.kind, event.task_number) == ("claimed", 3):
            when = next(claims_of_3)
        else:
            when = times[(event.kind, event.task_number)]
        Event.objects.filter(pk=event.pk).update(created_at=when)
    Task.objects.filter(number=1).update(created_at=at(18, 9), completed_at=at(18, 13))
    Task.objects.filter(number=2).update(created_at=at(18, 9, 30), completed_at=at(19, 10))
    Task.objects.filter(number=3).update(created_at=at(18, 10), completed_at=at(20, 10))
    Task.objects.filter(number=4).update(created_at=at(17, 12))
    spans = {
        (1, 1): (18, 10, 18, 13),
        (2, 1): (19, 9, 19, 10),
        (3, 1): (19, 8, 19, 9),
        (3, 2): (20, 8, 20, 10),
    }
    for (number, n), (d1, h1, d2, h2) in spans.items():
        Attempt.objects.filter(task__number=number, n=n).update(
            started_at=at(d1, h1), ended_at=at(d2, h2)
        )
    Usage.objects.filter(task_number=1).update(created_at=at(18, 13))
    Usage.objects.filter(task_number=3).update(created_at=at(20, 10))
    return board


def test_metrics_of_a_scripted_history_are_the_numbers_worked_out_by_hand(history):
    m = metrics(history, days=3, today=date(2026, 11, 20))
    assert (m["from"], m["to"]) == ("2026-11-18", "2026-11-20")
    # #1 completed on the 18th, #3 on the 20th.
    assert [d["completed"] for d in m["throughput"]] == [1, 0, 1]
    # Lead: #1 9:00 → 13:00 = 4 h; #3 18th 10:00 → 20th 10:00 = 48 h (nearest rank).
    lead = m["leadTimeHours"]
    assert (lead["count"], lead["p50"], lead["p85"], lead["p95"]) == (2, 4.0, 48.0, 48.0)
    assert [b["count"] for b in lead["histogram"]] == [0, 1, 0, 1, 0, 0]
    # Cycle: the completed attempts, #1 by alice 3 h, #3 by bob 2 h.
    cycle = m["cycleTimeHours"]
    assert (cycle["count"], cycle["p50"], cycle["p85"]) == (2, 2.0, 3.0)
    # Cumulative arrivals: #4 was created before the window; in it #1–#3 on the 18th;
    # started: #1 (18th), #2 and #3 by alice (19th), #3 by bob (20th); completed #1, #3.
    assert [(f["created"], f["started"], f["completed"]) for f in m["cumulativeFlow"]] == [
        (4, 1, 1),
        (4, 3, 1),
        (4, 4, 2),
    ]
    agents = {a["agent"]: a for a in m["agents"]}
    assert agents["alice"] == {
        "agent": "alice",
        "completed": 1,
        "failed": 0,
        "timedOut": 1,
        "medianCycleHours": 3.0,
        "successRate": 0.5,
        "costUsd": 0.5,
        "inputTokens": 0,
        "outputTokens": 0,
    }
    assert agents["bob"] == {
        "agent": "bob",
        "completed": 1,
        "failed": 1,
        "timedOut": 0,
        "medianCycleHours": 2.0,
        "successRate": 0.5,
        "costUsd": 0.25,
        "inputTokens": 0,
        "outputTokens": 0,
    }
    cost = m["cost"]
    assert [d["costUsd"] for d in cost["perDay"]] == [0.5, 0.0, 0.25]
    assert cost["perParent"] == [{"taskId": "4", "costUsd": 0.25}]
    assert (cost["totalUsd"], cost["budgetUsd"]) == (0.75, None)


def test_a_window_that_starts_later_counts_earlier_arrivals_as_before(history):
    m = metrics(history, days=1, today=date(2026, 11, 20))
    assert [(f["created"], f["started"], f["completed"]) for f in m["cumulativeFlow"]] == [
        (4, 4, 2)
    ]
    assert [d["completed"] for d in m["throughput"]] == [1]
    assert {a["agent"]: a["completed"] for a in m["agents"]} == {"bob": 1}


def test_percentiles_are_nearest_rank():
    assert [percentile([5, 1, 3, 2, 4], p) for p in (50, 85, 95, 100)] == [3, 5, 5, 5]
    assert percentile([], 50) is None


def test_the_metrics_api_and_page(history, person_client):
    answer = person_client.get("/api/boards/team/metrics?days=3&today=2026-11-20")
    assert answer.status_code == 200
    assert [d["completed"] for d in answer.json()["throughput"]] == [1, 0, 1]
    assert person_client.get("/api/boards/team/metrics?days=0").status_code == 400
    page = person_client.get("/boards/team/metrics/?days=3&today=2026-11-20").content.decode()
    assert "<svg" in page and "Throughput" in page
    assert "<table" in page and "<td>2026-11-18</td><td>1</td>" in page

"""Flow metrics and cost (issue 16) on a board built from a scripted history: the exact
numbers, worked out by hand in the comments."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from django.utils import timezone

from boards import services
from boards.metrics import metrics, percentile


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


class Clock:
    """The history's clock: every timestamp the services write is read from it."""

    def __init__(self) -> None:
        self.now = at(16, 9)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def history(board, alice, bob, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(timezone, "now", clock)

    def when(day: int, hour: int, minute: int = 0) -> None:
        clock.now = at(day, hour, minute)

    when(17, 12)
    alice.create("Later")  # 1: before the window
    when(18, 9)
    alice.create("Plan")  # 2
    when(18, 9, 30)
    alice.create("Build")  # 3
    when(18, 10)
    alice.create("Test")  # 4
    alice.call("TaskUpdate", {"taskId": "4", "parentId": "1"})
    day = {"leaseSeconds": 86_400}  # agents that work for hours hold a long lease
    alice.call("TaskClaim", {"taskId": "2", **day})
    when(18, 13)
    done = alice.call(
        "TaskUpdate", {"taskId": "2", "status": "completed", "usage": {"costUsd": 0.5}}
    )
    assert done.status == 200, done.body
    when(19, 8)
    alice.call("TaskClaim", {"taskId": "4"})  # the default 15-minute lease
    when(19, 9)  # alice went quiet: her 15-minute lease lapsed at 8:15
    assert services.leases_sweep() == 1
    bob.call("TaskClaim", {"taskId": "3", **day})
    when(19, 10)
    bob.call("TaskUpdate", {"taskId": "3", "status": "failed"})
    when(20, 8)
    bob.call("TaskClaim", {"taskId": "4", **day})
    when(20, 10)
    bob.call("TaskUpdate", {"taskId": "4", "status": "completed", "usage": {"costUsd": 0.25}})
    monkeypatch.undo()
    return board


def test_metrics_of_a_scripted_history_are_the_numbers_worked_out_by_hand(history):
    m = metrics(history, days=3, today=date(2026, 11, 20))
    assert (m["from"], m["to"]) == ("2026-11-18", "2026-11-20")
    # #2 completed on the 18th, #4 on the 20th.
    assert [d["completed"] for d in m["throughput"]] == [1, 0, 1]
    # Lead: #2 9:00 → 13:00 = 4 h; #4 18th 10:00 → 20th 10:00 = 48 h (nearest rank).
    lead = m["leadTimeHours"]
    assert (lead["count"], lead["p50"], lead["p85"], lead["p95"]) == (2, 4.0, 48.0, 48.0)
    assert [b["count"] for b in lead["histogram"]] == [0, 1, 0, 1, 0, 0]
    # Cycle: the attempts that completed, #2 by alice 3 h, #4 by bob 2 h.
    cycle = m["cycleTimeHours"]
    assert (cycle["count"], cycle["p50"], cycle["p85"]) == (2, 2.0, 3.0)
    # Cumulative arrivals: #1 was created before the window, #2–#4 on the 18th; started:
    # #2 (18th), #4 by alice and #3 by bob (19th), #4 by bob (20th); completed #2, #4.
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
    assert cost["perParent"] == [{"taskId": "1", "costUsd": 0.25}]
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

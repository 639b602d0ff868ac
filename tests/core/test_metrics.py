"""Flow metrics and cost (issue 16) on a board built from a scripted history: the exact
numbers, worked out by hand in the comments."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.http import QueryDict
from django.utils import timezone

from boards.core import services
from boards.core.metrics import (
    duration,
    histogram,
    metrics,
    metrics_query,
    money,
    percentile,
    range_default,
)
from boards.models import Event


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
    m = metrics(history, range_key="7d", today=date(2026, 11, 20))
    assert (m["range"], m["bucket"]) == ("7d", "day")
    assert (m["from"], m["to"]) == ("2026-11-14T00:00:00Z", "2026-11-21T00:00:00Z")
    # #2 completed on the 18th, #4 on the 20th.
    assert [d["completed"] for d in m["throughput"]] == [0, 0, 0, 0, 1, 0, 1]
    # Lead: #2 9:00 → 13:00 = 4 h; #4 18th 10:00 → 20th 10:00 = 48 h (nearest rank).
    lead = m["leadTimeSeconds"]
    assert (lead["count"], lead["p50"], lead["p85"], lead["p95"]) == (2, 14400, 172800, 172800)
    # Bins from the data's own spread: 4 h to 48 h fits in five of 12 h.
    assert [(b["label"], b["count"]) for b in lead["histogram"]] == [
        ("0–12 h", 1),
        ("12 h–1 d", 0),
        ("1 d–1.5 d", 0),
        ("1.5 d–2 d", 0),
        ("2 d–2.5 d", 1),
    ]
    # Cycle: the attempts that completed, #2 by alice 3 h, #4 by bob 2 h.
    cycle = m["cycleTimeSeconds"]
    assert (cycle["count"], cycle["p50"], cycle["p85"]) == (2, 7200, 10800)
    # Cumulative arrivals: #1 was created on the 17th, #2–#4 on the 18th; started: #2
    # (18th), #4 by alice and #3 by bob (19th), #4 by bob (20th); completed #2, #4.
    assert [(f["created"], f["started"], f["completed"]) for f in m["cumulativeFlow"]] == [
        (0, 0, 0),
        (0, 0, 0),
        (0, 0, 0),
        (1, 0, 0),
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
        "medianCycleSeconds": 10800,
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
        "medianCycleSeconds": 7200,
        "successRate": 0.5,
        "costUsd": 0.25,
        "inputTokens": 0,
        "outputTokens": 0,
    }
    cost = m["cost"]
    assert [d["costUsd"] for d in cost["perBucket"]] == [0, 0, 0, 0, 0.5, 0.0, 0.25]
    assert cost["perParent"] == [{"taskId": "1", "costUsd": 0.25}]
    assert (cost["totalUsd"], cost["budgetUsd"]) == (0.75, None)


def test_a_day_counts_arrivals_before_it_and_cuts_it_in_hours(history):
    m = metrics(history, range_key="today", today=date(2026, 11, 20))
    assert (m["bucket"], len(m["throughput"])) == ("hour", 24)
    # Bob claimed #4 at 8:00 and completed it at 10:00; everything else came before.
    assert m["cumulativeFlow"][0] == {
        "at": "2026-11-20T00:00:00Z",
        "created": 4,
        "started": 3,
        "completed": 1,
        "waiting": 1,
        "inProgress": 2,
    }
    assert [f["started"] for f in m["cumulativeFlow"]][7:9] == [3, 4]
    assert [t["completed"] for t in m["throughput"]][9:11] == [0, 1]
    assert [c["costUsd"] for c in m["cost"]["perBucket"]][10] == 0.25
    assert {a["agent"]: a["completed"] for a in m["agents"]} == {"bob": 1}


@pytest.fixture
def session(board, alice, monkeypatch):
    """A two-minute session: three tasks done in 40, 70 and 100 seconds, ending 5 minutes
    before now."""
    now = datetime(2026, 11, 20, 12, 0, 30, tzinfo=UTC)
    clock = Clock()
    monkeypatch.setattr(timezone, "now", clock)
    clock.now = now - timedelta(minutes=7)
    for n, seconds in enumerate((40, 70, 100), start=1):
        alice.create(f"Step {n}")
        alice.call("TaskClaim", {"taskId": str(n)})
        clock.now += timedelta(seconds=seconds)
        done = alice.call(
            "TaskUpdate", {"taskId": str(n), "status": "completed", "usage": {"costUsd": 0.254}}
        )
        assert done.status == 200, done.body
    clock.now = now
    return board


def test_a_two_minute_session_reads_in_minutes_and_seconds(session):
    m = metrics(session)  # the default: the smallest range that holds the activity
    assert (m["range"], m["bucket"], len(m["throughput"])) == ("1h", "minute", 60)
    assert sum(1 for t in m["throughput"] if t["completed"]) >= 2
    assert (m["cycleTimeSeconds"]["p50"], m["cycleTimeSeconds"]["p95"]) == (70, 100)
    assert m["cycleTimeSeconds"]["histogram"][0]["label"] == "40 s–50 s"
    assert m["cumulativeFlow"][-1]["completed"] == 3
    assert m["cumulativeFlow"][0]["created"] == 0


def test_the_page_of_a_two_minute_session_shows_seconds_and_money(session, person_client):
    page = person_client.get("/boards/team/metrics/").content.decode()
    assert 'aria-current="page">Last hour' in page
    assert "<td>1.2 min</td>" in page  # the cycle time's p50: 70 s
    assert "$0.76" in page and "0.762" not in page
    assert ">40 s<" in page or "40 s" in page


def test_range_default_grows_with_the_activity(history):
    # (the board fixture was made before the history's clock: put it at its start)
    Event.objects.filter(board=history, seq=1).update(created_at=at(16, 9))
    assert range_default(history, datetime(2026, 11, 20, 12, tzinfo=UTC)) == "7d"
    assert range_default(history, datetime(2026, 12, 10, tzinfo=UTC)) == "30d"
    assert range_default(history, datetime(2027, 3, 1, tzinfo=UTC)) == "30d"


def test_durations_and_money_read_as_people_write_them():
    assert [duration(s) for s in (0, 4.25, 45, 90, 600, 5400, 86_400 * 3, None)] == [
        "0 s",
        "4.2 s",
        "45 s",
        "1.5 min",
        "10 min",
        "1.5 h",
        "3 d",
        "—",
    ]
    assert [money(v) for v in (0, 0.003, 0.763191, 1204.5)] == [
        "$0.00",
        "< $0.01",
        "$0.76",
        "$1,204.50",
    ]


def test_histogram_bins_fit_the_spread():
    assert histogram([]) == []
    assert [b["label"] for b in histogram([5, 5, 5])] == ["5 s–6 s"]
    spread = histogram([30, 3000, 3600 * 5])
    assert len(spread) <= 8 and sum(b["count"] for b in spread) == 3


def test_percentiles_are_nearest_rank():
    assert [percentile([5, 1, 3, 2, 4], p) for p in (50, 85, 95, 100)] == [3, 5, 5, 5]
    assert percentile([], 50) is None


def test_the_metrics_api_and_page(history, person_client):
    answer = person_client.get("/api/boards/team/metrics?range=7d&today=2026-11-20")
    assert answer.status_code == 200
    assert [d["completed"] for d in answer.json()["throughput"]] == [0, 0, 0, 0, 1, 0, 1]
    page = person_client.get("/boards/team/metrics/?range=7d&today=2026-11-20").content.decode()
    assert "<svg" in page and "Throughput" in page
    assert "<table" in page and "<td>2026-11-18</td><td>1</td>" in page
    assert "<td>4 h</td>" in page  # the lead time's p50


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("range=2h", "range"),
        ("range=%00", "range"),
        ("range=7D", "range"),
        ("today=2026-13-01", "today"),
        ("today=٢٠٢٦-١١-٢٠", "today"),
    ],
)
def test_a_wrong_range_is_a_400_on_the_api_and_an_error_shown_on_the_page(
    board, person_client, query, field
):
    answer = person_client.get(f"/api/boards/team/metrics?{query}")
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["field"] == field
    page = person_client.get(f"/boards/team/metrics/?{query}")
    assert page.status_code == 400
    text = page.content.decode()
    assert f"{field}: " in text and "<h1>Flow and cost</h1>" in text


@pytest.mark.parametrize("query", ["", "range=1h", "range=today", "range=7d", "range=30d"])
def test_the_page_and_the_api_read_a_range_alike(board, person_client, query):
    answer = person_client.get(f"/api/boards/team/metrics?{query}")
    page = person_client.get(f"/boards/team/metrics/?{query}")
    assert (answer.status_code, page.status_code) == (200, 200)
    key = answer.json()["range"]
    assert f'href="?range={key}" aria-current="page"' in page.content.decode()
    assert metrics_query(QueryDict(query)) == ((query.split("=")[1] if query else None), None)


def test_short_ranges_read_the_events_of_one_day_only(session, django_assert_max_num_queries):
    # A binary search over seq (about log2 of the log's length) and one read of the day.
    with django_assert_max_num_queries(40):
        metrics(session, range_key="1h")

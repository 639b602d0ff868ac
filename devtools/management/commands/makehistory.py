"""Give a board weeks of history, for the metrics benchmark (``bench --scale``).

    python manage.py makehistory SLUG [--tasks 20000] [--events 200000] [--days 30]

It writes the past in bulk (finished tasks, their attempts, their events and the
board's flow days), as a board that ran for weeks would have them; it is a
benchmark's fixture, not a workload, so it does not go through the services.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone

from boards.models import Attempt, AttemptOutcome, Board, Event, FlowDay, Task


class Command(BaseCommand):
    help = "Give a board weeks of finished history (the metrics benchmark's fixture)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--tasks", type=int, default=20_000)
        parser.add_argument("--events", type=int, default=200_000)
        parser.add_argument("--days", type=int, default=30)

    def handle(
        self, *args: object, slug: str, tasks: int, events: int, days: int, **options: object
    ) -> None:
        make_history(slug, tasks=tasks, events=events, days=days)
        self.stdout.write(f"{slug}: {tasks} finished tasks, about {events} events over {days} days")


def make_history(slug: str, tasks: int = 20_000, events: int = 200_000, days: int = 30) -> None:
    """Give a board the history of weeks of work, for the metrics benchmark: ``tasks``
    finished tasks with their attempts, and status events up to ``events`` in all,
    spread over ``days`` days. Written in bulk (it is the past, not a workload)."""
    rng = random.Random(7)
    board = Board.objects.get(slug=slug)
    now = timezone.now()
    with transaction.atomic():
        start = board.task_counter
        rows = []
        for i in range(tasks):
            created = now - timedelta(seconds=rng.randrange(days * 86400))
            finished = created + timedelta(seconds=rng.randrange(1, 86400))
            rows.append(
                Task(
                    board=board,
                    number=start + i + 1,
                    subject=f"History {i}",
                    status="completed",
                    owner=f"agent-{i % 20}",
                    created_at=created,
                    updated_at=created,
                    completed_at=finished,
                    lead_seconds=(finished - created).total_seconds(),
                    attempts=1,
                )
            )
        Task.objects.bulk_create(rows, batch_size=2000)
        made = Task.objects.filter(board=board, number__gt=start).values_list(
            "pk", "number", "owner", "created_at", "completed_at"
        )
        attempts, log = [], []
        flow: Counter = Counter()
        seq = board.last_seq
        per_task = max(1, (events - tasks) // tasks)
        for pk, number, owner, created, completed in made:
            assert completed is not None
            attempts.append(
                Attempt(
                    task_id=pk,
                    n=1,
                    agent=owner,
                    started_at=created,
                    ended_at=completed,
                    outcome=AttemptOutcome.COMPLETED,
                    seconds=(completed - created).total_seconds(),
                )
            )
            flow[(created.date(), "created")] += 1
            life: list[tuple[str, dict, datetime]] = [("created", {"subject": "History"}, created)]
            for k in range(per_task):
                # Claimed, completed, then notes: a task's life, told at length.
                kind = ("claimed", "status")[k] if k < 2 else "updated"
                to = {"claimed": "in_progress", "status": "completed"}.get(kind)
                if to:
                    flow[(created.date(), to)] += 1
                data = (
                    {"fields": {"status": {"from": "pending", "to": to}}}
                    if to
                    else {"fields": {"notes": {}}}
                )
                life.append((kind, data, created + timedelta(seconds=k)))
            for kind, data, at in life:
                seq += 1
                log.append(
                    Event(
                        board=board,
                        seq=seq,
                        task_number=number,
                        actor=owner,
                        kind=kind,
                        data=data,
                        created_at=at,
                    )
                )
        Attempt.objects.bulk_create(attempts, batch_size=2000)
        Event.objects.bulk_create(log, batch_size=5000)
        FlowDay.objects.bulk_create(
            [FlowDay(board=board, day=d, status=st, count=n) for (d, st), n in flow.items()]
        )
        Board.objects.filter(pk=board.pk).update(
            last_seq=seq,
            task_counter=start + tasks,
            completed_count=board.completed_count + tasks,
        )

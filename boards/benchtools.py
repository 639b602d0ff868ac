"""Routes that exist only on a server started by ``manage.py bench`` (``KANBAN_BENCH=1``).

They give the benchmark its floor: a bare ``group_send`` to sockets that echo it, with
no database, no rendering and no service, so a push's cost can be read as a ratio.
"""

from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

ECHO_GROUP = "bench_echo"


class EchoConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.channel_layer.group_add(ECHO_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(ECHO_GROUP, self.channel_name)

    async def echo_frame(self, message: dict) -> None:
        await self.send(text_data=message["text"])


@csrf_exempt
async def echo(request: HttpRequest) -> JsonResponse:
    layer = get_channel_layer()
    assert layer is not None
    await layer.group_send(ECHO_GROUP, {"type": "echo.frame", "text": request.GET.get("n", "")})
    return JsonResponse({"ok": True})


def make_history(slug: str, tasks: int = 20_000, events: int = 200_000, days: int = 30) -> None:
    """Give a board the history of weeks of work, for the metrics benchmark: ``tasks``
    finished tasks with their attempts, and status events up to ``events`` in all,
    spread over ``days`` days. Written in bulk (it is the past, not a workload)."""
    import random
    from collections import Counter
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from .models import Attempt, AttemptOutcome, Board, Event, FlowDay, Task

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
            seq += 1
            log.append(
                Event(
                    board=board,
                    seq=seq,
                    task_number=number,
                    actor=owner,
                    kind="created",
                    data={"subject": "History"},
                    created_at=created,
                )
            )
            for k in range(per_task):
                seq += 1
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
                log.append(
                    Event(
                        board=board,
                        seq=seq,
                        task_number=number,
                        actor=owner,
                        kind=kind,
                        data=data,
                        created_at=created + timedelta(seconds=k),
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

"""What a person reads before deciding on an item of "Needs you" (SPEC §12), loaded when
they open it: the board's strip and the inbox stay one cheap read however many items wait."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from boards.models import Board, Reason, Role, Task
from boards.needs import reads
from boards.web.views.common import HtmxHttpRequest, board_access


@require_GET
@board_access("view")
def task_decided(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> HttpResponse:
    task = Task.objects.filter(board=board, number=number).first()
    if task is None:
        raise Http404("No such task on this board")
    agent = task.approval_requested_by if task.needs == Reason.APPROVAL else task.owner
    context = {"task": task, "agent": agent, "decided": reads.decided(board, task, agent)}
    return render(request, "boards/need_decided.html", context)

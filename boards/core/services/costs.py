"""What agents spend: usage reports on writes, summed per task, attempt and board, and
the board's budget that stops new claims once it is spent."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.db.models import F

from boards.core import limits, numbers
from boards.core.errors import Conflict, InvalidInput
from boards.core.services.work import Work
from boards.models import Attempt, Board, Status, Task, Usage

# What one report may say, and what a task and a board may add up to (``boards.core.limits``).
TOKENS_MAX = limits.TOKENS_MAX
COST_MAX = limits.COST_MAX
TASK_TOKENS_MAX = limits.TASK_TOKENS_MAX
TASK_COST_MAX = limits.TASK_COST_MAX
BOARD_COST_MAX = limits.BOARD_COST_MAX
CENT = Decimal("0.000001")
MODEL_MAX = limits.MODEL_MAX


def _count(usage: Mapping[str, Any], name: str) -> int:
    value = usage.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= TOKENS_MAX:
        raise InvalidInput(
            f"usage.{name}: a whole number from 0 to {TOKENS_MAX}",
            details=[{"field": f"usage.{name}"}],
        )
    return value


def _cost(usage: Mapping[str, Any]) -> Decimal:
    cost = numbers.amount(usage.get("costUsd", 0), field="usage.costUsd")
    if cost is None or not Decimal(0) <= cost <= COST_MAX:
        raise InvalidInput(f"usage.costUsd: a number from 0 to {COST_MAX}", field="usage.costUsd")
    return cost.quantize(CENT)


def add_usage(work: Work, task: Task, usage: Mapping[str, Any]) -> dict[str, Any] | None:
    """Add one usage report to the task (saved with it), its running attempt, the board's
    spend and the usage log. None when it reports nothing."""
    tokens_in, tokens_out = _count(usage, "inputTokens"), _count(usage, "outputTokens")
    cost = _cost(usage)
    model = usage.get("model") or ""
    if not isinstance(model, str) or len(model) > MODEL_MAX:
        raise InvalidInput(f"usage.model: at most {MODEL_MAX} characters", field="usage.model")
    if not (tokens_in or tokens_out or cost):
        return None
    _check_totals(work, task, tokens_in, tokens_out, cost)
    task.input_tokens += tokens_in
    task.output_tokens += tokens_out
    task.cost_usd += cost
    attempt = task.attempts if task.status == Status.IN_PROGRESS and task.attempts else None
    if attempt:
        Attempt.objects.filter(task=task, n=attempt).update(
            input_tokens=F("input_tokens") + tokens_in,
            output_tokens=F("output_tokens") + tokens_out,
            cost_usd=F("cost_usd") + cost,
        )
    parent = (
        Task.objects.filter(pk=task.parent_id).values_list("number", flat=True).first()
        if task.parent_id
        else None
    )
    Usage.objects.create(
        board=work.board,
        task_number=task.number,
        parent_number=parent,
        attempt=attempt,
        agent=work.actor,
        model=model,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=cost,
        created_at=work.now,
    )
    work.board.spent_usd += cost
    work.spent = True
    return {
        "inputTokens": tokens_in,
        "outputTokens": tokens_out,
        "costUsd": float(cost),
        "model": model,
    }


def _check_totals(work: Work, task: Task, tokens_in: int, tokens_out: int, cost: Decimal) -> None:
    """Refuse a report that would take a task's or the board's sums past their caps."""
    over = []
    if task.input_tokens + tokens_in > TASK_TOKENS_MAX:
        over.append(f"the task's input tokens past {TASK_TOKENS_MAX}")
    if task.output_tokens + tokens_out > TASK_TOKENS_MAX:
        over.append(f"the task's output tokens past {TASK_TOKENS_MAX}")
    if task.cost_usd + cost > TASK_COST_MAX:
        over.append(f"the task's cost past ${TASK_COST_MAX}")
    if work.board.spent_usd + cost > BOARD_COST_MAX:
        over.append(f"the board's spend past ${BOARD_COST_MAX}")
    if over:
        raise Conflict(
            f"Task #{task.number}: this usage report would take {' and '.join(over)}; "
            "nothing was recorded",
            code="usage_limit",
            details={
                "taskCostUsd": float(task.cost_usd),
                "boardSpentUsd": float(work.board.spent_usd),
            },
        )


USAGE_FIELDS = ["input_tokens", "output_tokens", "cost_usd"]


def save_usage_only(work: Work, task: Task) -> None:
    """A write that reported usage and changed nothing else: store the sums, re-render
    the card (no event: nothing happened to the task)."""
    task.save(update_fields=USAGE_FIELDS)
    work.touched.add(task.number)
    work.change("updated", task.number, fields=["usage"])


def check_budget(board: Board) -> None:
    """Claims stop once the board's budget is spent, until a person raises it."""
    if board.budget_usd is not None and board.spent_usd >= board.budget_usd:
        raise Conflict(
            f"The board's budget is spent (${board.spent_usd:.2f} of ${board.budget_usd:.2f}); "
            "a person must raise it before work is claimed",
            code="budget_exhausted",
            details={"spentUsd": float(board.spent_usd), "budgetUsd": float(board.budget_usd)},
        )

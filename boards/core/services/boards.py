"""Boards: creation and reset."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction

from boards.core import limits, numbers
from boards.core.errors import Conflict, InvalidInput
from boards.core.services.work import KEPT_FIELDS, Outcome, text, unit_of_work
from boards.core.states import EventKind
from boards.models import Board, Task

SLUG_MAX = limits.SLUG_MAX

# What a new board starts with beyond its row: the gate's default rules. The gate sits
# above the core (its rules write through the unit of work), so ``boards.apps`` installs
# its seeder here at ready, as it installs the web's renderer in ``events``.
_defaults: Callable[[Board], None] | None = None


def install_board_defaults(seed: Callable[[Board], None]) -> None:
    """Set what ``board_create`` runs on a new board, inside its transaction."""
    global _defaults
    _defaults = seed


def board_create(*, slug: str, name: str = "", actor: str = "system") -> Board:
    """A new, empty board; its first event records who made it."""
    slug = slug.strip()
    if not slug or len(slug) > SLUG_MAX:
        raise InvalidInput(f"slug: 1 to {SLUG_MAX} characters", field="slug")
    try:
        validate_slug(slug)
    except ValidationError as exc:
        raise InvalidInput(
            "slug: letters, numbers, hyphens or underscores only", field="slug"
        ) from exc
    name = text("name", name or slug, limits.BOARD_NAME_MAX, required=True)
    with transaction.atomic():
        if Board.objects.filter(slug=slug).exists():
            raise Conflict(f"Board {slug!r} already exists", code="exists")
        if _defaults is None:
            # A board without the default rules would let its agents' risky calls by.
            raise RuntimeError("no board defaults installed (boards.apps installs the gate's)")
        board = Board.objects.create(slug=slug, name=name)
        _defaults(board)
        with unit_of_work(board, actor, person=True) as work:
            work.record(EventKind.BOARD_CREATED, None, slug=slug, name=name)
    return board


def board_reset(*, board: Board, actor: str) -> Outcome:
    """Delete every task of the board and restart numbering at 1. The event log stays."""
    with unit_of_work(board, actor, person=True) as work:
        Task.objects.filter(board=work.board).delete()
        work.board.task_counter = 0
        work.board.completed_count = work.board.failed_count = work.board.cancelled_count = 0
        for field in KEPT_FIELDS.values():
            setattr(work.board, field, 0)
        work.reset = True
        work.record(EventKind.RESET, None)
    return Outcome(None, work.changes)


# The board's work settings: public name → (model field, smallest, largest); None clears.
SETTINGS = {
    "leaseSeconds": ("lease_seconds", limits.LEASE_MIN, limits.LEASE_MAX),
    "maxAttempts": ("max_attempts", 1, 100),
    "maxInProgressPerAgent": ("max_in_progress_per_agent", 1, 10_000),
    "maxInProgress": ("max_in_progress", 1, 100_000),
    "silentAfterSeconds": ("silent_after_seconds", 10, 86_400),
    "failureGraceSeconds": ("failure_grace_seconds", 0, 86_400),
}
# Settings that always have a value (the rest: None means no limit / the server's default).
REQUIRED_SETTINGS = frozenset({"max_attempts", "silent_after_seconds", "failure_grace_seconds"})


BUDGET_MAX = limits.BUDGET_MAX


def _budget(value: Any) -> Decimal | None:
    """``budgetUsd``: dollars (0 to a billion, to the cent), or None for no budget."""
    if value is None:
        return None
    # NaN and Infinity are no amount (and no comparison with NaN holds): numbers.amount
    # answers None for them, as for anything that is not a plain decimal number.
    budget = numbers.amount(value, field="budgetUsd")
    if budget is None or not Decimal(0) <= budget <= BUDGET_MAX:
        raise InvalidInput(
            f"budgetUsd: dollars from 0 to {BUDGET_MAX} (like 250 or 99.50), "
            "or empty for no budget",
            field="budgetUsd",
        )
    return budget.quantize(Decimal("0.01"))


def board_settings(*, board: Board, actor: str, **values: Any) -> Board:
    """Change the board's work settings (an admin's decision); each change is an event."""
    changed: dict[str, dict] = {}
    with unit_of_work(board, actor, person=True) as work:
        if "budgetUsd" in values:
            budget = _budget(values.pop("budgetUsd"))
            if budget != work.board.budget_usd:
                before = work.board.budget_usd
                changed["budgetUsd"] = {
                    "from": float(before) if before is not None else None,
                    "to": float(budget) if budget is not None else None,
                }
                work.board.budget_usd = budget
                Board.objects.filter(pk=work.board.pk).update(budget_usd=budget)
        if "stepUpApprovals" in values:
            # Approving a gated task needs a passkey, from a person who has one (SPEC §14).
            flag = values.pop("stepUpApprovals")
            if not isinstance(flag, bool):
                raise InvalidInput("stepUpApprovals: true or false", field="stepUpApprovals")
            if flag != work.board.step_up_approvals:
                changed["stepUpApprovals"] = {"from": work.board.step_up_approvals, "to": flag}
                work.board.step_up_approvals = flag
                Board.objects.filter(pk=work.board.pk).update(step_up_approvals=flag)
        for public, value in values.items():
            if public not in SETTINGS:
                raise InvalidInput(f"{public}: not a board setting", field=public)
            field, low, high = SETTINGS[public]
            if value is None and field in REQUIRED_SETTINGS:
                raise InvalidInput(f"{public}: required", field=public)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high
            ):
                raise InvalidInput(f"{public}: a whole number from {low} to {high}", field=public)
            if getattr(work.board, field) != value:
                changed[public] = {"from": getattr(work.board, field), "to": value}
                setattr(work.board, field, value)
        ints = {public: entry for public, entry in changed.items() if public in SETTINGS}
        if ints:
            Board.objects.filter(pk=work.board.pk).update(
                **{SETTINGS[public][0]: entry["to"] for public, entry in ints.items()}
            )
        if changed:
            work.record(EventKind.SETTINGS, None, fields=changed)
        if "maxAttempts" in changed:
            # Which pending tasks are ready depends on it: every open task is counted again.
            work.recheck.update(
                Task.objects.filter(board=work.board).unfinished().values_list("pk", flat=True)
            )
    for public in ints:
        setattr(board, SETTINGS[public][0], getattr(work.board, SETTINGS[public][0]))
    board.budget_usd = work.board.budget_usd
    board.step_up_approvals = work.board.step_up_approvals
    return board

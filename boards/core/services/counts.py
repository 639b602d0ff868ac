"""The board's kept open counts, checked against a count of its rows (``manage.py
recount``): what drifted, and (``fix``) set right under the board's lock."""

from __future__ import annotations

from django.db.models import Q

from boards.core.rules import count_delta
from boards.core.services.work import KEPT_FIELDS, unit_of_work
from boards.core.states import EventKind
from boards.models import Board, Task

SWEEPER_ACTOR = "system"


def recount(board: Board, *, fix: bool = False) -> dict[str, tuple[int, int]]:
    """Each kept count that differs from a recount, as ``{key: (kept, counted)}``; with
    ``fix`` the board's counters and its tasks' bits are set to the recount."""
    with unit_of_work(board, SWEEPER_ACTOR, person=True) as work:
        counted = dict.fromkeys(KEPT_FIELDS, 0)
        wrong: dict[int, list[int]] = {}
        rows = Task.objects.filter(board=work.board).filter(
            Q(status__in=("pending", "in_progress")) | ~Q(needs="") | ~Q(counted=0)
        )
        for pk, bits, stored in rows.counted_now(work.board.max_attempts):
            for key, delta in count_delta(0, bits).items():
                counted[key] += delta
            if bits != stored:
                wrong.setdefault(bits, []).append(pk)
        drift = {
            key: (getattr(work.board, field), counted[key])
            for key, field in KEPT_FIELDS.items()
            if getattr(work.board, field) != counted[key]
        }
        if fix:
            for bits, pks in wrong.items():
                Task.objects.filter(pk__in=pks).update(counted=bits)
            for key, field in KEPT_FIELDS.items():
                setattr(work.board, field, counted[key])
        if drift and fix:
            work.record(EventKind.RECOUNTED, None, drift={k: list(v) for k, v in drift.items()})
    return drift

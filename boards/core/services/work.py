"""The unit of work every service runs in, and the input checks they share.

A service opens ``unit_of_work(board, actor)``: one transaction with the board's
row locked (so numbering, the event sequence, claims and the dependency graph
never race). Inside it records Events and changes through the ``Work`` object;
when the block ends the events are stored, the board's counters written, and the
change published to open browsers and watchers after commit (``events.publish``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from boards.core import events, limits
from boards.core.activity import status_to
from boards.core.errors import InvalidInput, refuse
from boards.core.rules import KEPT_COUNTS, count_delta, counted_bits
from boards.core.selectors import TaskView, cycle_through, parse_task_id, view_of
from boards.core.services import outbox
from boards.core.services.flags import Flags, derive_flags
from boards.core.states import EventKind
from boards.models import Board, Dependency, Event, FlowDay, Label, Reason, Status, Task

# The board's counter of each finished status.
FINISHED_COUNTERS = {
    "completed": "completed_count",
    "failed": "failed_count",
    "cancelled": "cancelled_count",
}
# The board's kept open counts (``rules.KEPT_COUNTS``), by field.
KEPT_FIELDS = {key: f"{key}_count" for key in KEPT_COUNTS}
SUBJECT_MAX = limits.SUBJECT_MAX
NAME_MAX = limits.NAME_MAX
LONG_TEXT_MAX = limits.LONG_TEXT_MAX
EVENT_VALUE_MAX = limits.EVENT_VALUE_MAX


@dataclass(frozen=True)
class Grant:
    """The token an agent's call came with: which agents are its own, and whether it
    is an orchestrator's (it may take over other agents' work)."""

    token_id: int | None
    orchestrator: bool = False


_grant: ContextVar[Grant | None] = ContextVar("kanban_grant", default=None)


@contextmanager
def acting_with(grant: Grant) -> Iterator[None]:
    """Run the services inside with ``grant`` as the calling agent's token (the tool
    pipeline sets it once per call, so no service signature carries it)."""
    reset = _grant.set(grant)
    try:
        yield
    finally:
        _grant.reset(reset)


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass
class Outcome:
    """What a write did: the task it was about, and the answer's ``changes``."""

    task_number: int | None
    changes: list[dict]
    awaiting_approval: bool = False
    operations: list[dict] = field(default_factory=list)
    # The task's view as the write committed it, built in its transaction from the rows
    # in hand (``Work.answer``); None: the answer reads the task after commit.
    view: TaskView | None = None


class Work:
    """One service call's unit of work: events to record and tasks to re-render.

    ``person`` says whether the actor is a person (the board, admin, commands)
    or an agent (the tool API, MCP, the seed dialects); the task state machine
    holds agents to rules that people decide (the approval gate).
    """

    def __init__(self, board: Board, actor: str, *, person: bool, approver: bool = True) -> None:
        self.board = board
        self.actor = actor
        self.person = person
        # A person who may decide approvals (approver role and up; commands and admin).
        self.approver = person and approver
        self.grant = _grant.get() or Grant(None)
        self.now = timezone.now()
        self.events: list[Event] = []
        self.changes: list[dict] = []
        self.touched: set[int] = set()
        self.created: set[int] = set()
        self.deleted: set[int] = set()
        # Tasks whose own status a call changed: their change is reported, not an auto_(un)block.
        self.restatused: set[int] = set()
        self.reset = False
        # Tasks (pks) whose stored blocked / stuck flags this write may change: the ones
        # whose status or blockers changed, and the dependents of a changed status.
        # Only these are re-derived when the work ends, whatever the board's size.
        self.recheck: set[int] = set()
        # Edges added (task pk, blocker pk): the cycle check searches from these only.
        self.new_edges: list[tuple[int, int]] = []
        # Each task's status before this work changed it: the board's finished counters.
        self.status_before: dict[int, str] = {}
        # Usage was reported (boards.core.services.costs): the board's spend changed.
        self.spent = False
        # Something the header shows changed without an event that says so (the roster).
        self.header = False
        # The sweeper's measure of no progress: work started before then has stalled.
        self.stalled_before: datetime | None = None
        # The rechecked tasks' flags as stored when the work ends (``_store_flags``): the
        # kept counts read them instead of the same rows again.
        self.derived: dict[int, Flags] = {}
        # The sweeper's measure of a board every agent left (None: a write, which keeps it).
        self.unattended: bool | None = None
        # The task the write answers with, as stored (the service sets it after its last
        # save): its flags are derived without reading it again, and (``viewed``) its view
        # is built from it when the work ends instead of read after commit (``view``).
        # Each task's labels as the work left them, when known.
        self.answer: Task | None = None
        self.viewed = True
        self.view: TaskView | None = None
        self.labels: dict[int, list[str]] = {}

    def touch_held_by(self, agent: str) -> None:
        """Re-render the cards ``agent`` holds: they show whether it is there."""
        self.touched.update(
            Task.objects.filter(board=self.board, owner=agent, status=Status.IN_PROGRESS)
            .order_by()
            .values_list("number", flat=True)[:50]
        )

    def status_changed(self, task: Task) -> list[int]:
        """Note a change of ``task``'s status; returns its dependents' numbers."""
        # Both ways in one read: its dependents' flags follow its status, and its blockers'
        # "something waits on it" too (SPEC §12).
        edges = Dependency.objects.filter(Q(blocker=task) | Q(task=task)).order_by()
        dependents = []
        for dependent_pk, number, blocker_pk in edges.values_list(
            "task_id", "task__number", "blocker_id"
        ):
            if blocker_pk == task.pk:
                dependents.append((dependent_pk, number))
            else:
                self.recheck.add(blocker_pk)
        self.status_before.setdefault(task.pk, task.status)
        self.recheck.add(task.pk)
        self.recheck.update(pk for pk, _ in dependents)
        return sorted(number for _, number in dependents)

    def record(self, kind: str, number: int | None, **data: Any) -> None:
        self.board.last_seq += 1
        self.events.append(
            Event(
                board=self.board,
                seq=self.board.last_seq,
                task_number=number,
                actor=self.actor,
                kind=kind,
                data=data,
            )
        )
        if number is not None:
            self.touched.add(number)

    def change(self, kind: str, number: int, **extra: Any) -> None:
        self.changes.append({"type": kind, "taskId": str(number), **extra})

    def save_task(self, task: Task, kind: str, *, change: str = "updated", **data: Any) -> None:
        """Store a changed task: a new version, its event, and its entry in the answer's changes.

        ``data["fields"]``, when given, is the event's diff; its keys are the
        changed fields the answer names.
        """
        task.version += 1
        task.updated_at = self.now
        task.save()
        self.recheck.add(task.pk)  # what it needs from a person may have changed with it
        self.record(kind, task.number, **data)
        if change == "updated":
            self.change(change, task.number, fields=list(data.get("fields", {})))
        else:
            self.change(change, task.number)

    def _count_finished(self) -> None:
        """Move the board's finished counters by the status changes this work made."""
        after = dict(
            Task.objects.filter(pk__in=self.status_before).order_by().values_list("pk", "status")
        )
        for pk, before in self.status_before.items():
            now = after.get(pk)  # None: deleted
            if now == before:
                continue
            for status, delta in ((before, -1), (now, +1)):
                field = FINISHED_COUNTERS.get(status or "")
                if field:
                    setattr(self.board, field, max(0, getattr(self.board, field) + delta))

    def uncount(self, task: Task) -> None:
        """A task about to be deleted leaves the kept counts."""
        self._move_counts(task.counted, 0)

    def _move_counts(self, before: int, after: int) -> None:
        for key, delta in count_delta(before, after).items():
            field = KEPT_FIELDS[key]
            setattr(self.board, field, max(0, getattr(self.board, field) + delta))

    def bits(self, task: Task) -> int:
        """The kept counts a task in hand adds to (``rules.counted_bits``)."""
        return counted_bits(
            status=task.status,
            blocked=task.blocked,
            stuck=task.stuck,
            needs=task.needs,
            failures=task.failures,
            approval_state=task.approval_state,
            max_attempts=self.board.max_attempts,
        )

    def created_task(self, task: Task) -> None:
        """A task about to be inserted: counted as it is made (its bits stored with it), so
        that a task nothing else changes costs no read and no write when the work ends."""
        task.counted = self.bits(task)
        self._move_counts(0, task.counted)

    def _count_open(self) -> None:
        """Move the board's kept counts by what the tasks this work changed now add to them
        (their bits, ``rules.counted_bits``, against the bits last counted)."""
        regroup: dict[int, list[int]] = {}
        for pk, after, before in self._counted_now():
            if after != before:
                self._move_counts(before, after)
                regroup.setdefault(after, []).append(pk)
        for bits, pks in regroup.items():
            Task.objects.filter(pk__in=pks).update(counted=bits)
            if self.answer is not None and self.answer.pk in pks:
                self.answer.counted = bits

    def _counted_now(self) -> list[tuple[int, int, int]]:
        """(pk, the kept counts it adds to now, what was counted) of each task this work
        changed: the rechecked ones from their flags as stored, the others read."""
        max_attempts = self.board.max_attempts
        found = [
            (
                flags.pk,
                counted_bits(
                    status=flags.status,
                    blocked=flags.blocked,
                    stuck=flags.stuck,
                    needs=flags.needs,
                    failures=flags.failures,
                    approval_state=flags.approval_state,
                    max_attempts=max_attempts,
                ),
                flags.counted,
            )
            for flags in self.derived.values()
        ]
        # A rechecked task missing from the flags no longer exists (deleted).
        numbers = self.touched - {flags.number for flags in self.derived.values()}
        task = self.answer
        if task is not None and task.number in numbers and task.number in self.created:
            # Created by this work and not rechecked: its row is the one in hand, counted
            # when it was made (``created``).
            numbers.discard(task.number)
            found.append((task.pk, self.bits(task), task.counted))
        if numbers:
            rows = Task.objects.filter(board=self.board, number__in=numbers)
            found += [row for row in rows.counted_now(max_attempts) if row[0] not in self.derived]
        return found

    def _count_flow(self) -> None:
        """Today's arrivals into each status (and creations): the board's flow metrics."""
        tally: dict[str, int] = {}
        for event in self.events:
            key = "created" if event.kind == EventKind.CREATED else status_to(event.data)
            if key:
                tally[key] = tally.get(key, 0) + 1
        day = self.now.date()
        for status, n in tally.items():
            # The board's row is locked: no other writer counts this board's day.
            counted = FlowDay.objects.filter(board=self.board, day=day, status=status).update(
                count=F("count") + n
            )
            if not counted:
                FlowDay.objects.create(board=self.board, day=day, status=status, count=n)

    def _store_flags(self) -> None:
        """Re-derive blocked, stuck and what needs a person for the rechecked tasks, store
        the ones that changed, report blocked flips of tasks the call did not change
        itself, and record each task that comes to need a person (SPEC §12)."""
        groups: dict[tuple[bool, bool, str], list[int]] = {}
        flipped: dict[bool, list[int]] = {True: [], False: []}
        known = {self.answer.pk: self.answer} if self.answer is not None else None
        for flags in derive_flags(
            self.board, self.recheck, self.now, self.stalled_before, self.unattended, known=known
        ):
            self.derived[flags.pk] = flags
            if self.answer is not None and flags.pk == self.answer.pk and flags.changed:
                _flags_onto(self.answer, flags, self.now)
            if not flags.changed:
                continue
            groups.setdefault((flags.blocked, flags.stuck, flags.needs), []).append(flags.pk)
            number = flags.number
            self.touched.add(number)
            if flags.was_blocked != flags.blocked and number not in self.restatused:
                flipped[flags.blocked].append(number)
            # A request for approval says so itself (approval_requested).
            if flags.needs not in ("", flags.was_needs, Reason.APPROVAL):
                self.record(
                    EventKind.NEEDS_ATTENTION,
                    number,
                    reason=flags.needs,
                    failures=flags.failures,
                    maxAttempts=self.board.max_attempts,
                )
        for number in sorted(set(flipped[False]) - self.deleted):
            self.record(EventKind.UNBLOCKED, number)
            self.change("auto_unblock", number)
        for number in sorted(set(flipped[True]) - self.created):
            self.record(EventKind.BLOCKED, number)
            self.change("auto_block", number)
        for (blocked, stuck, needs), pks in groups.items():
            rows = Task.objects.filter(pk__in=pks)
            rows.update(blocked=blocked, stuck=stuck)
            if needs:
                # Since when: kept while the reason stays, set when it begins.
                rows.exclude(needs=needs).update(needs=needs, needs_since=self.now)
            else:
                rows.exclude(needs="").update(needs="", needs_since=None)

    def task(
        self, ident: str | int, refs: Mapping[str, int] | None = None, *, field: str = "taskId"
    ) -> Task:
        """A task of this board by public id (or a batch ref); 404 when there is none."""
        if refs and isinstance(ident, str) and ident in refs:
            number = refs[ident]
        else:
            number = parse_task_id(ident, field=field)
        # (board, number) is unique: unordered, not ``first()``, whose ORDER BY costs
        # compiling on every write.
        task = next(iter(Task.objects.filter(board=self.board, number=number).order_by()[:1]), None)
        if task is None:
            raise refuse("task_not_found", number=number)
        return task

    def finish(self) -> None:
        cycle = cycle_through(self.new_edges) if self.new_edges else None
        if cycle:
            raise InvalidInput(
                "Cycle detected: " + " → ".join(str(n) for n in cycle),
                field="blockedBy",
                code="cycle",
                cycle=[str(n) for n in cycle],
            )
        if self.recheck:
            self._store_flags()
        if self.status_before:
            self._count_finished()
        if not self.reset:
            self._count_open()
        Event.objects.bulk_create(self.events)
        self._count_flow()
        outbox.record(self.board, self.events)
        Board.objects.filter(pk=self.board.pk).update(
            last_seq=self.board.last_seq,
            task_counter=self.board.task_counter,
            updated_at=self.now,
            spent_usd=self.board.spent_usd,
            **{field: getattr(self.board, field) for field in FINISHED_COUNTERS.values()},
            **{field: getattr(self.board, field) for field in KEPT_FIELDS.values()},
        )
        events.publish(
            self.board,
            self.events,
            self.touched,
            reset=self.reset,
            header=self.reset or self.header or events.changes_header(self.events) or self.spent,
        )
        if self.answer is not None and self.viewed:
            self.view = self._answer_view(self.answer)

    def _answer_view(self, task: Task) -> TaskView | None:
        """The answer's view of ``task`` as this work leaves it, inside its transaction
        (the board is locked: nothing else has changed it), from what the work holds:
        the row as saved with its flags as stored, its edges as ``derive_flags`` read
        them, its labels as set. None when the work does not know its edges (a write
        that did not recheck it): the answer then reads it after commit."""
        if task.number in self.deleted:
            return None
        created = task.number in self.created
        flags = self.derived.get(task.pk)
        if flags is None and not created:
            return None
        # A new task has no edges but the ones this work added, which rechecked it.
        blockers, blocks = (flags.blockers, flags.blocks) if flags else ((), ())
        # What the work does not hold: a task it did not make has labels and children it
        # did not set (a read each: cheaper than asking the task's read for them).
        labels = self.labels.get(task.pk)
        children: list[int] = []
        if not created:
            held, children = _labels_and_children(task.pk)
            if labels is None:
                labels = held
        labels = sorted(labels or [])
        if task.parent_id is not None and not Task.parent.is_cached(task):
            # Its number only (``view_parent_number``), not the whole parent's row.
            task.parent_number = (  # type: ignore[attr-defined]
                Task.objects.filter(pk=task.parent_id).values_list("number", flat=True).first()
            )
        return view_of(
            self.board, task, blockers=blockers, blocks=blocks, children=children, labels=labels
        )


# Names from the models' metadata, never from input: a label row is (0, its name), a
# child's (its number, NULL).
_LABELS_AND_CHILDREN = (
    f"SELECT 0, {Label._meta.get_field('name').column} FROM {Label._meta.db_table} "  # noqa: S608
    f"WHERE {Label._meta.get_field('task').column} = %s "
    f"UNION ALL SELECT {Task._meta.get_field('number').column}, NULL FROM {Task._meta.db_table} "
    f"WHERE {Task._meta.get_field('parent').column} = %s"
)


def _labels_and_children(pk: int) -> tuple[list[str], list[int]]:
    """A task's label names and its children's numbers, in one statement. Written as SQL:
    on the write's answer (every TaskUpdate) the ORM's compiling of two queries costs more
    than running them."""
    with connection.cursor() as cursor:
        cursor.execute(_LABELS_AND_CHILDREN, [pk, pk])
        rows = cursor.fetchall()
    return [name for number, name in rows if name is not None], [
        number for number, name in rows if name is None
    ]


def _flags_onto(task: Task, flags: Flags, now: datetime) -> None:
    """Keep a task in hand as ``Work._store_flags`` stores its flags."""
    if flags.needs != task.needs:
        task.needs_since = now if flags.needs else None
    task.blocked, task.stuck, task.needs = flags.blocked, flags.stuck, flags.needs


@contextmanager
def unit_of_work(
    board: Board, actor: str, *, person: bool = False, approver: bool = True
) -> Iterator[Work]:
    with transaction.atomic():
        # One lock per board serialises its writers: task numbers, event sequence,
        # claims and cycle checks all read-then-write the same rows.
        locked = Board.objects.select_for_update().get(pk=board.pk)
        work = Work(locked, actor, person=person, approver=approver)
        yield work
        work.finish()
    board.last_seq = locked.last_seq
    board.task_counter = locked.task_counter


def text(name: str, value: str, limit: int, *, required: bool = False) -> str:
    """A checked text field: a string without NUL, within ``limit``, non-empty when required."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name}: must be a string", field=name)
    if "\x00" in value:
        raise InvalidInput(f"{name}: must not contain the NUL character", field=name)
    value = value.strip() if required else value
    if required and not value:
        raise InvalidInput(f"{name}: must not be empty", field=name)
    if len(value) > limit:
        raise InvalidInput(f"{name}: at most {limit} characters (got {len(value)})", field=name)
    return value


def shown(value: Any) -> Any:
    """A value as an event keeps it: long texts shortened."""
    if isinstance(value, str) and len(value) > EVENT_VALUE_MAX:
        return value[:EVENT_VALUE_MAX] + "…"
    return value

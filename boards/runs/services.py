"""The runners' write path (SPEC §16): a runner's hello and polls, the commands queued for
it (each delivered once, or refused as stale), its answers, and the sweep that finds it
gone. Each write is one of the core's units of work, or one transaction on the runner's
own rows; what a person sees change (the roster) is recorded as an event and pushed after
commit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from boards.core.errors import InvalidInput, NotFound, PermissionDenied
from boards.core.services.work import unit_of_work
from boards.core.states import EventKind
from boards.models import AgentToken, Board, CommandState, Runner, RunnerCommand

# What a runner may answer in one poll.
ACKS_MAX = 100


def poll_seconds() -> float:
    """How long a runner's poll is held (``KANBAN_RUNNER_POLL_SECONDS``)."""
    return max(0.5, float(settings.KANBAN_RUNNER_POLL_SECONDS))


def offline_after() -> timedelta:
    """A runner unseen for two poll periods is offline."""
    return timedelta(seconds=2 * poll_seconds())


def runner_hello(
    *,
    board: Board,
    token: AgentToken,
    name: str,
    host: str,
    version: str,
    clients: list[dict[str, Any]],
    repos: list[dict[str, Any]],
    max_sessions: int,
) -> Runner:
    """A runner says who it is (on every start and reconnect): it is registered under its
    token's name, or its row takes what it says now. Records ``runner_seen``; the roster
    is pushed after commit. ``name`` must be the token's runner (403 otherwise)."""
    if name != token.agent:
        raise PermissionDenied(
            f"name: this token is runner {token.agent!r}'s; start it with --name "
            f"{token.agent!r}, or issue a token for {name!r} (issuetoken <slug> --runner NAME)",
            code="wrong_runner",
        )
    with unit_of_work(board, name) as work:
        runner, _ = Runner.objects.get_or_create(
            board=work.board, name=name, defaults={"last_seen": work.now}
        )
        runner.token = token
        runner.host = host
        runner.version = version
        runner.clients = clients
        runner.repos = repos
        runner.max_sessions = max_sessions
        runner.last_seen = work.now
        runner.connected = True
        runner.save()
        work.record(EventKind.RUNNER_SEEN, None, name=name, host=host)
        work.header = True
    return runner


def runner_of(board: Board, token: AgentToken) -> Runner:
    """The runner a runner's token registered (404 before its hello)."""
    runner = Runner.objects.filter(board=board, name=token.agent).first()
    if runner is None:
        raise NotFound(
            f"Runner {token.agent!r} has not said hello on this board: "
            "POST /api/boards/<slug>/runners/hello first",
            code="runner_unregistered",
        )
    return runner


def runner_polled(*, runner: Runner, running: int) -> Runner:
    """A poll came: the runner is seen now, with ``running`` sessions. A runner the sweep
    found gone comes back (``runner_seen``, pushed); otherwise only its row is touched."""
    now = timezone.now()
    if runner.connected:
        Runner.objects.filter(pk=runner.pk).update(last_seen=now, running=running)
        runner.last_seen, runner.running = now, running
        return runner
    with unit_of_work(runner.board, runner.name) as work:
        Runner.objects.filter(pk=runner.pk).update(last_seen=now, running=running, connected=True)
        work.record(EventKind.RUNNER_SEEN, None, name=runner.name, host=runner.host)
        work.header = True
    runner.last_seen, runner.running, runner.connected = now, running, True
    return runner


def command_send(
    *,
    board: Board,
    runner: str,
    kind: str,
    args: dict[str, Any] | None = None,
    sent_by: str = "",
    ttl: float | None = None,
) -> RunnerCommand:
    """Queue a command for the runner named ``runner`` (404 when the board has none):
    its next poll takes it, or its poll now held wakes (``runner_command`` is pushed to
    the board's group after commit). Not taken within ``ttl`` seconds (default
    ``KANBAN_RUNNER_COMMAND_TTL_SECONDS``), it is refused as stale instead."""
    ttl = float(settings.KANBAN_RUNNER_COMMAND_TTL_SECONDS) if ttl is None else ttl
    with unit_of_work(board, sent_by) as work:
        found = Runner.objects.filter(board=work.board, name=runner).first()
        if found is None:
            raise NotFound(
                f"No runner called {runner[:64]!r} on this board", code="runner_not_found"
            )
        command = RunnerCommand.objects.create(
            runner=found,
            kind=kind,
            args=args or {},
            sent_by=sent_by,
            sent_at=work.now,
            expires_at=work.now + timedelta(seconds=max(0.0, ttl)),
        )
        work.record(
            EventKind.RUNNER_COMMAND, None, name=found.name, command=kind, commandId=command.pk
        )
    return command


def stale_why(command: RunnerCommand) -> str:
    ttl = (command.expires_at - command.sent_at).total_seconds()
    return (
        f"stale: runner {command.runner.name!r} did not take it within {ttl:g} s of its "
        "sending; send it again"
    )


@transaction.atomic
def commands_take(*, runner: Runner) -> list[RunnerCommand]:
    """The runner's queued commands, each delivered once: marked delivered as they are
    handed out (the rows locked, so two polls never both take one). Those past their TTL
    are refused as stale, never delivered."""
    now = timezone.now()
    queued = list(
        RunnerCommand.objects.select_for_update()
        .filter(runner=runner, state=CommandState.QUEUED)
        .order_by("id")
    )
    taken = []
    for command in queued:
        command.runner = runner
        if command.expires_at <= now:
            command.state = CommandState.STALE
            command.answer = {"why": stale_why(command)}
            command.answered_at = now
        else:
            command.state = CommandState.DELIVERED
            command.delivered_at = now
            taken.append(command)
        command.save(update_fields=["state", "answer", "answered_at", "delivered_at"])
    return taken


@transaction.atomic
def commands_ack(*, runner: Runner, acks: list[dict[str, Any]]) -> int:
    """The runner's answers to commands it was given (``{"id", "ok", "report" | "why"}``):
    done, or refused with its reason. An answer to a command already answered is
    ignored (a poll sent again); to one it was never given, 400 naming it. How many
    were recorded."""
    if len(acks) > ACKS_MAX:
        raise InvalidInput(f"acks: at most {ACKS_MAX} a poll", field="acks")
    ids = [ack["id"] for ack in acks]
    found = {
        c.pk: c for c in RunnerCommand.objects.select_for_update().filter(runner=runner, pk__in=ids)
    }
    now = timezone.now()
    recorded = 0
    for number, ack in enumerate(acks):
        command = found.get(ack["id"])
        if command is None or command.state in (CommandState.QUEUED, CommandState.STALE):
            raise InvalidInput(
                f"acks.{number}.id: command {ack['id']} was never given to this runner",
                field=f"acks.{number}.id",
            )
        if command.state != CommandState.DELIVERED:
            continue
        command.state = CommandState.DONE if ack["ok"] else CommandState.REFUSED
        command.answer = ack["report"] if ack["ok"] else {"why": ack["why"]}
        command.answered_at = now
        command.save(update_fields=["state", "answer", "answered_at"])
        recorded += 1
    return recorded


def runners_sweep() -> int:
    """Runners unseen for two poll periods are gone: each recorded once (``runner_gone``,
    the roster pushed). Run by the sweeper; how many went."""
    cutoff = timezone.now() - offline_after()
    gone = 0
    quiet = Runner.objects.filter(connected=True, last_seen__lt=cutoff).select_related("board")
    for runner in list(quiet[:200]):
        with unit_of_work(runner.board, "") as work:
            # Seen again since the read: a poll raced the sweep and the runner stays.
            if not Runner.objects.filter(pk=runner.pk, connected=True, last_seen__lt=cutoff).update(
                connected=False
            ):
                continue
            work.record(EventKind.RUNNER_GONE, None, name=runner.name, host=runner.host)
            work.header = True
            gone += 1
    return gone

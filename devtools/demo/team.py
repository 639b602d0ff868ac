"""The demo's simulated team: an orchestrator and N workers, each a thread calling the
board's HTTP tool API under its own name with one team token (``X-Agent``).

The orchestrator plans the project in one TaskBatch and watches the board; workers
claim ready tasks with a short lease, work on them (a wait scaled by the speed, with
heartbeats), complete or fail them, ask a person before the approval-gated step, and
read the messages people send them. To show recovery, one worker "crashes" (stops
calling) on its first task, whose lease lapses so another worker finishes it, and the
first failure is retried (a second attempt succeeds).
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from devtools import liveserver

from .plan import PLAN, PLAN_SUBJECT, STEPS, outcome_for, plan_ops, usage_for

TERMINAL = frozenset({"completed", "failed", "cancelled"})
DEAD = frozenset({"failed", "cancelled"})


class DemoError(Exception):
    """The demo cannot go on; the message says why, for the person who ran it."""


# --- reading the board ---------------------------------------------------------------------


def stuck_ids(tasks: dict[str, dict[str, Any]]) -> set[str]:
    """Pending tasks that wait, directly or through other waiting tasks, on failed or
    cancelled work: they can never start."""
    stuck: set[str] = set()
    changed = True
    while changed:
        changed = False
        for task in tasks.values():
            if task["id"] in stuck or task["status"] != "pending":
                continue
            for blocker in task["blockedBy"]:
                other = tasks.get(blocker)
                if blocker in stuck or (other is not None and other["status"] in DEAD):
                    stuck.add(task["id"])
                    changed = True
                    break
    return stuck


@dataclass
class Progress:
    """The plan's tasks, as the last TaskList showed them."""

    plan: list[dict[str, Any]]
    stuck: set[str]

    @classmethod
    def read(cls, tasks: Iterable[dict[str, Any]], plan_ids: set[str]) -> Progress:
        everything = {t["id"]: t for t in tasks}
        return cls(
            [everything[i] for i in sorted(plan_ids, key=int) if i in everything],
            stuck_ids(everything),
        )

    @property
    def settled(self) -> bool:
        """Nothing of the plan can make progress any more."""
        return all(t["status"] in TERMINAL or t["id"] in self.stuck for t in self.plan)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(
            (
                "completed",
                "in progress",
                "ready",
                "awaiting approval",
                "blocked",
                "failed",
                "cancelled",
            ),
            0,
        )
        for task in self.plan:
            status = task["status"]
            if status == "in_progress":
                counts["in progress"] += 1
            elif status != "pending":
                counts[status] += 1
            elif task["approval"]["state"] == "requested":
                counts["awaiting approval"] += 1
            elif task["blocked"]:
                counts["blocked"] += 1
            else:
                counts["ready"] += 1
        return counts

    def line(self) -> str:
        counts = self.counts()
        parts = [f"Tasks {counts.pop('completed')}/{len(self.plan)} done"]
        parts += [f"{n} {name}" for name, n in counts.items() if n]
        return " · ".join(parts)


# --- one agent's connection ----------------------------------------------------------------


class ServerUnreachable(Exception):
    pass


@dataclass
class Reply:
    status: int
    body: dict[str, Any]

    @property
    def message(self) -> str:
        error = self.body.get("error") or {}
        return str(error.get("message") or self.body)[:200]


@dataclass
class Api:
    """An agent's side of the HTTP tool API: one name, the team token."""

    url: str
    board: str
    token: str
    name: str
    on_unread: Callable[[Api, int], None] | None = None
    # Told about each message the agent reads from its inbox.
    listener: Callable[[dict[str, Any]], None] | None = None

    def call(self, tool: str, body: dict[str, Any] | None = None, *, wait: float = 0) -> Reply:
        try:
            status, data = liveserver.call(
                self.url,
                self.board,
                self.token,
                tool,
                body or {},
                agent=self.name,
                timeout=30 + wait,
            )
        except (OSError, ValueError) as exc:  # URLError is an OSError
            raise ServerUnreachable(f"{self.url}: {exc}") from exc
        reply = Reply(status, data if isinstance(data, dict) else {})
        unread = reply.body.get("unreadMessages") or 0
        if unread and tool != "InboxRead" and self.on_unread is not None:
            self.on_unread(self, unread)
        return reply


def server_check(url: str, board: str) -> int:
    """HTTP status of the board's tool list (200 or 404); raises when nobody answers."""
    try:
        with urllib.request.urlopen(  # noqa: S310 - the board's own http(s) URL
            f"{url}/api/boards/{board}/tools", timeout=10
        ) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ServerUnreachable(f"{url}: {exc}") from exc


# --- the team ------------------------------------------------------------------------------


# The workers' claims: long work is kept alive with TaskHeartbeat, a silent worker loses it.
LEASE_SECONDS = 10


@dataclass
class Team:
    url: str
    board: str
    token: str
    speed: float
    seed: int
    write: Callable[[str, str], None]
    verbose: bool
    stop: threading.Event = field(default_factory=threading.Event)
    plan_ids: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    # One simulated crash and one retry per run (set by run_team), taken by the first
    # worker that gets there.
    crashes: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, what: str) -> bool:
        """Whether this worker gets to do the run's one crash (or retry)."""
        with self.lock:
            left = getattr(self, what)
            if left:
                setattr(self, what, left - 1)
            return bool(left)

    def api(self, name: str) -> Api:
        return Api(self.url, self.board, self.token, name, on_unread=self.read_inbox)

    @property
    def board_url(self) -> str:
        return f"{self.url}/boards/{self.board}/"

    def idle(self) -> float:
        """How long an agent waits before asking again when there is nothing to do."""
        return max(0.1, 1.0 / self.speed)

    def read_inbox(self, api: Api, unread: int) -> None:
        reply = api.call("InboxRead", {"ack": True})
        if reply.status != 200:
            return
        for message in reply.body.get("messages", []):
            about = f" about #{message['taskId']}" if message.get("taskId") else ""
            self.write(api.name, f"message from {message['from']}{about}: {message['body']}")
            if api.listener is not None:
                api.listener(message)

    def progress(self, api: Api) -> Progress | None:
        reply = api.call("TaskList", {"detail": True, "limit": 500})
        if reply.status != 200:
            return None
        return Progress.read(reply.body["tasks"], self.plan_ids)


class Worker:
    def __init__(self, team: Team, name: str) -> None:
        self.team = team
        self.name = name
        self.api = team.api(name)
        self.api.listener = self.heard
        self.task: dict[str, Any] | None = None
        self.notes: list[str] = []

    def say(self, text: str) -> None:
        self.team.write(self.name, text)

    def heard(self, message: dict[str, Any]) -> None:
        if self.task is not None:
            self.notes.append(f"Message from {message['from']}: {message['body']}")

    def run(self) -> None:
        try:
            self.loop()
        except ServerUnreachable as exc:
            self.team.errors.append(f"{self.name}: lost the server ({exc})")
            self.say(f"lost the server: {exc}")
            self.team.stop.set()
        except Exception as exc:  # a demo bug must not leave a thread silently dead
            self.team.errors.append(f"{self.name}: {exc!r}")
            self.say(f"crashed: {exc!r}")
            self.team.stop.set()
            raise

    def loop(self) -> None:
        stop = self.team.stop
        while not stop.is_set():
            reply = self.api.call("TaskClaim", {"leaseSeconds": LEASE_SECONDS})
            if reply.status == 409:  # another worker won a race: normal, ask again
                if self.team.verbose:
                    self.say(f"lost a race ({reply.message}); trying again")
                stop.wait(0.05)
                continue
            if reply.status not in (200, 202):
                self.say(f"claim failed ({reply.status}): {reply.message}")
                stop.wait(self.team.idle())
                continue
            task = reply.body.get("task")
            if task is None:
                progress = self.team.progress(self.api)
                if progress is not None and progress.settled:
                    return
                stop.wait(self.team.idle())
                continue
            self.task, self.notes = task, []
            try:
                if reply.body.get("awaitingApproval"):
                    task = self.await_approval(task)
                    if task is None:
                        continue
                    self.task = task
                else:
                    self.say(f"claimed #{task['id']} {task['subject']}")
                    if self.team.take("crashes"):
                        self.say(
                            f"crashes while on #{task['id']} (simulated): it stops calling; its "
                            f"lease lapses within {LEASE_SECONDS} s and the task goes back to "
                            "pending for another worker"
                        )
                        return
                self.work(task)
            finally:
                self.task = None

    def await_approval(self, task: dict[str, Any]) -> dict[str, Any] | None:
        """Watch a gated task until a person decides; the task when approved and ours."""
        number = task["id"]
        self.say(
            f"asked for approval to start #{number} {task['subject']}; "
            f"waiting for a person on {self.team.board_url}"
        )
        chunk = min(10.0, max(1.0, 60.0 / self.team.speed))
        while not self.team.stop.is_set():
            reply = self.api.call(
                "TaskWatch", {"taskId": number, "timeoutSeconds": chunk}, wait=chunk
            )
            if reply.status == 404:
                self.say(f"#{number} was deleted; moving on")
                return None
            if reply.status != 200:
                self.say(f"watch on #{number} failed ({reply.status}): {reply.message}")
                self.team.stop.wait(self.team.idle())
                continue
            current = reply.body.get("task")
            if current is None:
                self.say(f"#{number} was deleted; moving on")
                return None
            approval = current["approval"]
            if current["status"] in TERMINAL:
                who = approval.get("decidedBy") or "someone"
                note = f" ({approval['note']})" if approval.get("note") else ""
                verb = "denied" if approval["state"] == "denied" else current["status"]
                self.say(f"#{number} {verb} by {who}{note}; moving on")
                return None
            if approval["state"] == "approved":
                self.say(f"#{number} approved by {approval.get('decidedBy')}; starting")
                if current["status"] == "in_progress" and current["owner"] == self.name:
                    return current
                claim = self.api.call("TaskClaim", {"taskId": number})
                if claim.status == 200 and claim.body.get("task"):
                    return dict(claim.body["task"])
                self.say(f"could not start #{number} after approval: {claim.message}")
                return None
            if approval["state"] != "requested":
                self.say(f"#{number} no longer needs approval; leaving it")
                return None
        return None

    def work(self, task: dict[str, Any]) -> None:
        number, subject = task["id"], task["subject"]
        fails, seconds = outcome_for(self.team.seed, task)
        fails = fails and task.get("attempt", 1) <= 1  # a retried step goes through
        # What the work cost, as a real worker reports it (at the demo's own speed 1).
        usage = usage_for(self.team.seed, task, seconds)
        seconds /= self.team.speed
        active = task.get("activeForm") or f"Working on: {subject}"
        self.notes.insert(0, f"{self.name} started: {active.lower()}.")
        if task.get("notes"):  # keep what is already there (a person's, an earlier attempt's)
            self.notes.insert(0, task["notes"])
        reply = self.api.call(
            "TaskUpdate", {"taskId": number, "activeForm": active, "notes": self.note_text()}
        )
        if reply.status != 200:
            self.say(f"could not start #{number} ({reply.status}): {reply.message}")
            return
        if self.team.verbose:
            self.say(f"{active} (#{number}, ~{seconds:.1f}s)")
        version = reply.body["task"]["version"]
        if self.busy(number, seconds):
            self.release(number)
            return
        step = STEPS.get((task.get("metadata") or {}).get("ref", ""))
        if fails:
            status = "failed"
            reason = step.failure if step and step.failure else "the simulated work went wrong"
            result = f"{reason[0].upper()}{reason[1:]}."
        else:
            status = "completed"
            result = step.result if step else f"Done: {subject}."
        for _attempt in range(3):
            sent = self.note_text()
            reply = self.api.call(
                "TaskUpdate",
                {
                    "taskId": number,
                    "status": status,
                    "result": result,
                    "notes": sent,
                    "expectedVersion": version,
                    "usage": usage,
                },
            )
            if reply.status == 200:
                break
            if reply.status != 409:
                self.say(f"could not finish #{number} ({reply.status}): {reply.message}")
                return
            # Someone changed the task meanwhile: still ours and in progress?
            current = self.api.call("TaskGet", {"taskId": number})
            if current.status != 200:
                self.say(f"dropped #{number}: {current.message}")
                return
            now = current.body["task"]
            if now["status"] != "in_progress" or now["owner"] != self.name:
                who = f", owner {now['owner']}" if now["owner"] else ""
                self.say(f"dropped #{number}: it is now {now['status']}{who}")
                return
            version = now["version"]
        else:
            self.say(f"gave up finishing #{number}: it keeps changing")
            return
        if self.note_text() != sent:  # a message came with the answer: note it too
            self.api.call("TaskUpdate", {"taskId": number, "notes": self.note_text()})
        if status == "failed":
            self.say(f"failed #{number} {subject}: {reason}")
            if self.team.take("retries"):
                retry = self.api.call("TaskUpdate", {"taskId": number, "status": "pending"})
                if retry.status == 200:
                    self.say(f"retries #{number}: back to pending for a second attempt")
            return
        unblocked = [c["taskId"] for c in reply.body["changes"] if c["type"] == "auto_unblock"]
        then = f" → unblocked {', '.join('#' + n for n in unblocked)}" if unblocked else ""
        self.say(f"completed #{number} {subject}{then}")

    def busy(self, number: str, seconds: float) -> bool:
        """Work for ``seconds``, renewing the lease meanwhile; True when told to stop."""
        end = time.monotonic() + seconds
        beat = LEASE_SECONDS / 3
        while (left := end - time.monotonic()) > 0:
            if self.team.stop.wait(min(left, beat)):
                return True
            if left > beat:
                self.api.call("TaskHeartbeat", {"taskId": number})
        return False

    def note_text(self) -> str:
        return "\n".join(self.notes)

    def release(self, number: str) -> None:
        """Stopped mid-task: put it back, so the board shows no abandoned work."""
        self.notes.append(f"{self.name} stopped before finishing; released the task.")
        reply = self.api.call(
            "TaskUpdate",
            {"taskId": number, "status": "pending", "owner": "", "notes": self.note_text()},
        )
        if reply.status == 200:
            self.say(f"stopped; released #{number}")


class Orchestrator:
    def __init__(self, team: Team) -> None:
        self.team = team
        self.api = team.api("orchestrator")

    def say(self, text: str) -> None:
        self.team.write("orchestrator", text)

    def plan(self) -> None:
        run = uuid.uuid4().hex[:8]
        reply = self.api.call("TaskBatch", {"ops": plan_ops(run)})
        if reply.status != 200:
            raise DemoError(f"TaskBatch failed ({reply.status}): {reply.message}")
        operations = reply.body["operations"]
        self.team.plan_ids = {op["taskId"] for op in operations}
        numbers = sorted(int(i) for i in self.team.plan_ids)
        edges = sum(len(step.after) for step in PLAN)
        self.say(
            f"planned {PLAN_SUBJECT!r} in one TaskBatch: {len(numbers)} tasks "
            f"#{numbers[0]}–#{numbers[-1]}, {edges} dependencies, 1 needs approval"
        )

    def watch(self, deadline: float) -> Progress | None:
        """Print a line whenever the plan's counts change; return when it has settled."""
        last_line = ""
        asked: set[str] = set()
        progress: Progress | None = None
        while time.monotonic() < deadline and not self.team.stop.is_set():
            current = self.team.progress(self.api)
            if current is not None:
                progress = current
                line = progress.line()
                if line != last_line:
                    self.say(line)
                    last_line = line
                for task in progress.plan:
                    if task["approval"]["state"] == "requested" and task["id"] not in asked:
                        asked.add(task["id"])
                        self.say(
                            f"#{task['id']} {task['subject']} needs a person: "
                            f"approve or deny it on {self.team.board_url}"
                        )
                if progress.settled:
                    return progress
            self.team.stop.wait(max(0.1, 0.5 / self.team.speed))
        return progress


def check_token(team: Team) -> None:
    """Make sure the server knows the board and the token before the team starts."""
    reply = team.api("orchestrator").call("TaskList", {"view": "ready"})
    if reply.status in (401, 404):
        raise DemoError(
            f"The server at {team.url} does not know this board or token "
            f"({reply.message}). Run the demo against the server's database (the "
            "same DATABASE_URL), or pass --token with a team token of the board."
        )
    if reply.status == 403:
        raise DemoError(f"Token refused: {reply.message}")
    if reply.status != 200:
        raise DemoError(f"TaskList failed ({reply.status}): {reply.message}")


def run_team(team: Team, agents: int, deadline: float) -> Progress | None:
    """Plan, start the workers, watch until the plan settles (or the deadline); the plan's
    progress as the team left it."""
    orchestrator = Orchestrator(team)
    try:
        orchestrator.plan()
    except ServerUnreachable as exc:
        raise DemoError(f"Lost the server: {exc}") from exc
    # With company, one worker crashes and its work comes back; the first failure is retried.
    team.crashes = 1 if agents > 1 else 0
    team.retries = 1
    workers = [Worker(team, f"worker-{i}") for i in range(1, agents + 1)]
    threads = [threading.Thread(target=w.run, name=w.name, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    progress: Progress | None = None
    try:
        progress = orchestrator.watch(deadline)
    except ServerUnreachable as exc:
        team.errors.append(f"orchestrator: lost the server ({exc})")
    except KeyboardInterrupt:
        orchestrator.say("interrupted: the workers put back what they hold…")
        team.errors.append("interrupted")
    finally:
        team.stop.set()
        for thread in threads:
            thread.join(timeout=15)
    if progress is not None and not progress.settled:
        # Workers released their tasks on the way out: report the board as they left it.
        with contextlib.suppress(ServerUnreachable):
            progress = team.progress(orchestrator.api) or progress
    return progress


def summary_lines(progress: Progress | None, elapsed: float) -> list[str]:
    """The closing report: the counts, each dead end with its reason, what waits on them."""
    if progress is None:
        return [f"No progress could be read ({elapsed:.1f}s)."]
    counts = progress.counts()
    stuck = [t for t in progress.plan if t["id"] in progress.stuck]
    finished = counts["completed"] + counts["failed"] + counts["cancelled"]
    open_ = len(progress.plan) - finished - len(stuck)
    lines = [
        f"Summary: {len(progress.plan)} tasks — {counts['completed']} completed, "
        f"{counts['failed']} failed, {counts['cancelled']} cancelled, "
        f"{len(stuck)} blocked"
        + (f", {open_} still open" if open_ else "")
        + f" — in {elapsed:.1f}s"
    ]
    plan = {t["id"]: t for t in progress.plan}
    for task in progress.plan:
        if task["status"] in DEAD:
            why = task["result"] or task["approval"].get("note") or ""
            lines.append(
                f"  ✗ #{task['id']} {task['subject']} ({task['status']})"
                + (f": {why}" if why else "")
            )
    for task in stuck:
        waits = [
            f"#{b}"
            for b in task["blockedBy"]
            if b in progress.stuck or (b in plan and plan[b]["status"] in DEAD)
        ]
        lines.append(f"  ▸ #{task['id']} {task['subject']}: waits on {', '.join(waits)}")
    if progress.settled:
        lines.append("Nothing left can make progress: the demo is over.")
    return lines

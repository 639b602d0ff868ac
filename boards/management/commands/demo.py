"""``python manage.py demo``: a simulated team of agents working a plan on a running board.

An orchestrator plans a software project ("Ship the billing page") in one
``TaskBatch``; N workers claim ready tasks, work on them (a sleep scaled by
``--speed``), complete them or now and then fail them, ask a person before the
one approval-gated step, and read the messages people send them. The agents talk
to the running server only through the HTTP tool API (urllib, JSON, a real
token), exactly as separate agent processes would; nothing they do touches the
database directly. Watch it on the board: ``<url>/boards/<board>/``.

Tokens: unless ``--token`` is given, the command makes sure the board exists and
issues itself a team token *in-process* (``services.token_issue``), so it must run
against the same database as the server (same ``DATABASE_URL``); the token is
revoked when the demo ends. With ``--token`` (a team token from the board's
"Agent tokens" or ``manage.py issuetoken BOARD demo --team``) it needs no
database at all. Every agent names itself in the ``X-Agent`` header:
``orchestrator``, ``worker-1`` … ``worker-N``.

Workers claim with ``TaskClaim {}`` (the lowest-numbered ready task on the board),
so on a board with other ready work they take that too, as real agents would.
The demo ends when no task of its plan can make progress any more: every task is
finished, or waits on a failed or cancelled task. ``--max-seconds`` is a safety
stop (exit status 1).
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections

TERMINAL = frozenset({"completed", "failed", "cancelled"})
DEAD = frozenset({"failed", "cancelled"})
FAILURE_RATE = 0.10

# --- the plan ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    ref: str
    subject: str
    active: str
    parent: str | None
    after: tuple[str, ...]
    estimate: float  # seconds of simulated work at --speed 1
    prompt: str
    result: str
    failure: str = ""
    approval: bool = False
    description: str = ""


PLAN_SUBJECT = "Ship the billing page"
PLAN: tuple[Step, ...] = (
    Step(
        "ship",
        PLAN_SUBJECT,
        "Shipping the billing page",
        None,
        ("design", "backend", "frontend", "release"),
        2,
        "Confirm every phase is done and close the project.",
        "Billing page live for all customers; project closed.",
        "the launch checklist has an unchecked legal review",
        description="Customers can see their plan, pay invoices by card and download past "
        "invoices from a new billing page.",
    ),
    Step(
        "design",
        "Design the billing page",
        "Signing off the billing page design",
        "ship",
        ("spec", "mockups"),
        2,
        "Review the spec and the mockups together and sign off the design.",
        "Design signed off: spec v2 and mockups approved by product.",
        "product wants a second round on the plan comparison table",
    ),
    Step(
        "spec",
        "Write the billing page spec",
        "Writing the billing page spec",
        "design",
        (),
        4,
        "Write a one-page spec: plans, invoices list, card payment, proration, taxes, "
        "empty and error states.",
        "Spec in docs/billing-page.md: 6 user stories, proration rules, tax handling.",
        "open question on proration for mid-cycle downgrades",
    ),
    Step(
        "mockups",
        "Draw the billing page mockups",
        "Drawing the billing page mockups",
        "design",
        ("spec",),
        5,
        "Draw desktop and mobile mockups for every state in the spec.",
        "Mockups for 5 states (desktop + mobile) in the design file, linked in the spec.",
        "the design file's shared library is locked by another team",
    ),
    Step(
        "backend",
        "Build the billing backend",
        "Reviewing the billing backend",
        "ship",
        ("schema", "migration", "invoice-api", "stripe", "webhooks", "api-tests"),
        2,
        "Review the backend pull requests as a whole and merge them.",
        "Backend merged: invoice model, API, Stripe integration and webhooks.",
        "a reviewer found the webhook handler is not idempotent",
    ),
    Step(
        "schema",
        "Design the invoice schema",
        "Designing the invoice schema",
        "backend",
        ("spec",),
        3,
        "Design tables for invoices, invoice lines and payments; money as integer cents.",
        "Schema: invoice, invoice_line, payment; amounts in cents, currency per invoice.",
        "currency handling conflicts with the existing accounts table",
    ),
    Step(
        "migration",
        "Write the invoice migration",
        "Writing the invoice migration",
        "backend",
        ("schema",),
        3,
        "Write an additive (expand-only) migration for the invoice schema; no locks on "
        "large tables.",
        "Migration 0042_invoices: 3 new tables, 2 indexes, runs in 0.8 s on a prod copy.",
        "the migration locks the accounts table for 40 s on a production copy",
    ),
    Step(
        "invoice-api",
        "Write the invoice API",
        "Writing the invoice API",
        "backend",
        ("migration",),
        6,
        "Add GET /invoices, GET /invoices/<id> and GET /invoices/<id>/pdf with pagination.",
        "Invoice API: 3 endpoints, paginated, PDF rendering, 24 unit tests.",
        "PDF rendering needs a font the container image does not ship",
    ),
    Step(
        "stripe",
        "Integrate Stripe payments",
        "Integrating Stripe payments",
        "backend",
        ("schema",),
        6,
        "Create payment intents for open invoices and record the payment on success.",
        "Stripe payment intents wired in; card payments recorded against invoices.",
        "the Stripe sandbox keys in the vault have expired",
    ),
    Step(
        "webhooks",
        "Handle Stripe webhooks",
        "Handling Stripe webhooks",
        "backend",
        ("stripe",),
        4,
        "Handle payment_intent.succeeded / payment_failed, verify signatures, be idempotent.",
        "Webhook endpoint verifies signatures and handles 4 event types idempotently.",
        "webhook signatures fail to verify behind the load balancer",
    ),
    Step(
        "api-tests",
        "Test the invoice API",
        "Testing the invoice API",
        "backend",
        ("invoice-api", "webhooks"),
        4,
        "Write integration tests for the invoice API and the webhook flow.",
        "31 integration tests pass; coverage of billing/ at 94%.",
        "the webhook integration test is flaky against the Stripe sandbox",
    ),
    Step(
        "frontend",
        "Build the billing frontend",
        "Reviewing the billing frontend",
        "ship",
        ("page-ui", "payment-form", "wire-up", "a11y"),
        2,
        "Review the frontend pull requests together and merge them.",
        "Frontend merged: billing page, payment form, API wiring.",
        "the bundle grew by 180 kB over the budget",
    ),
    Step(
        "page-ui",
        "Build the billing page layout",
        "Building the billing page layout",
        "frontend",
        ("mockups",),
        5,
        "Build the page from the mockups: current plan, invoice list, empty and error states.",
        "Billing page layout with plan summary and invoice table, responsive.",
        "the design system has no table component for mobile",
    ),
    Step(
        "payment-form",
        "Build the payment form",
        "Building the payment form",
        "frontend",
        ("page-ui",),
        4,
        "Build the card form with Stripe Elements, validation and error messages.",
        "Payment form with Stripe Elements, inline validation, 3-D Secure handled.",
        "Stripe Elements does not load under the page's content security policy",
    ),
    Step(
        "wire-up",
        "Connect the page to the invoice API",
        "Connecting the page to the invoice API",
        "frontend",
        ("payment-form", "invoice-api"),
        3,
        "Load invoices from the API, paginate, download PDFs, pay open invoices.",
        "Page reads the invoice API: pagination, PDF download, pay-now flow.",
        "the API's pagination cursor is not URL-safe",
    ),
    Step(
        "a11y",
        "Check the billing page's accessibility",
        "Checking the billing page's accessibility",
        "frontend",
        ("page-ui",),
        2,
        "Check keyboard navigation, focus order, labels and contrast (WCAG 2.1 AA).",
        "Accessibility checked: 2 contrast fixes, labels on every input, axe clean.",
        "screen readers do not announce the invoice status column",
    ),
    Step(
        "release",
        "Release the billing page",
        "Releasing the billing page",
        "ship",
        ("docs", "prod-migration", "staging", "e2e", "deploy", "monitor", "announce"),
        2,
        "Confirm the release checklist is complete.",
        "Release checklist complete.",
        "the release checklist is missing the rollback plan",
    ),
    Step(
        "docs",
        "Document the invoice API",
        "Documenting the invoice API",
        "release",
        ("invoice-api",),
        3,
        "Document the three invoice endpoints with examples in the API reference.",
        "API reference updated: 3 endpoints with request and response examples.",
        "the docs build breaks on the new OpenAPI file",
    ),
    Step(
        "prod-migration",
        "Run the production migration",
        "Running the production migration",
        "release",
        ("migration",),
        3,
        "Run migration 0042_invoices on the production database in the maintenance window. "
        "This changes production: wait for a person's approval.",
        "Migration 0042_invoices applied on production in 1.1 s; no lock waits.",
        "the production database is in read-only failover",
        approval=True,
    ),
    Step(
        "staging",
        "Deploy to staging",
        "Deploying to staging",
        "release",
        ("backend", "frontend"),
        3,
        "Deploy the merged backend and frontend to staging.",
        "Staging runs build 2024.11.3 with the billing page behind a flag.",
        "the staging deploy ran out of disk on the build runner",
    ),
    Step(
        "e2e",
        "Run the checkout tests on staging",
        "Running the checkout tests on staging",
        "release",
        ("staging",),
        4,
        "Run the end-to-end checkout suite on staging with a test card.",
        "End-to-end checkout suite green on staging (12 scenarios).",
        "3-D Secure challenge times out on staging",
    ),
    Step(
        "deploy",
        "Deploy the billing page to production",
        "Deploying the billing page to production",
        "release",
        ("e2e", "prod-migration"),
        3,
        "Deploy to production and turn the billing page flag on for everyone.",
        "Production runs build 2024.11.3; billing page flag on for 100%.",
        "the canary's error rate crossed 2% and the deploy rolled back",
    ),
    Step(
        "monitor",
        "Watch error rates after launch",
        "Watching error rates after launch",
        "release",
        ("deploy",),
        3,
        "Watch errors, payment failures and latency for the first hour after launch.",
        "First hour: error rate 0.02%, 148 payments, p95 latency 210 ms.",
        "payment failures at 9% since launch: card declines mislabelled",
    ),
    Step(
        "announce",
        "Announce the billing page to customers",
        "Announcing the billing page to customers",
        "release",
        ("deploy",),
        2,
        "Post the changelog entry and email customers about the new billing page.",
        "Changelog posted; announcement email sent to 3,412 customers.",
        "the email provider flagged the announcement as promotional",
    ),
)
STEPS = {step.ref: step for step in PLAN}


def plan_ops(run: str) -> list[dict[str, Any]]:
    """The whole plan as one TaskBatch: creates that name each other by ref."""
    ops = []
    for step in PLAN:
        op: dict[str, Any] = {
            "op": "create",
            "ref": step.ref,
            "subject": step.subject,
            "activeForm": step.active,
            "prompt": step.prompt,
            "metadata": {"plan": run, "ref": step.ref, "estimate": f"{step.estimate:g}h"},
        }
        if step.description:
            op["description"] = step.description
        if step.parent:
            op["parentId"] = step.parent
        if step.after:
            op["blockedBy"] = list(step.after)
        if step.approval:
            op["requiresApproval"] = True
        ops.append(op)
    return ops


def outcome_for(seed: int, task: dict[str, Any]) -> tuple[bool, float]:
    """(fails?, work seconds at speed 1) — decided by the seed and the task alone,
    so a run is the same whichever worker claims which task."""
    key = (task.get("metadata") or {}).get("ref") or f"task-{task['id']}"
    rng = random.Random(f"{key}/{seed}")
    fails = rng.random() < FAILURE_RATE
    step = STEPS.get(key)
    estimate = step.estimate if step else 3.0
    return fails, estimate * rng.uniform(0.6, 1.4)


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
        request = urllib.request.Request(  # noqa: S310 - the board's own http(s) URL
            f"{self.url}/api/boards/{self.board}/tools/{tool}",
            data=json.dumps(body or {}).encode(),
            method="POST",
            headers={
                "Authorization": f"Bearer {self.token}",
                "X-Agent": self.name,
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30 + wait) as response:  # noqa: S310
                reply = Reply(response.status, json.loads(response.read() or b"{}"))
        except urllib.error.HTTPError as exc:
            try:
                data = json.loads(exc.read() or b"{}")
            except ValueError:
                data = {}
            reply = Reply(exc.code, data if isinstance(data, dict) else {})
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ServerUnreachable(f"{self.url}: {exc}") from exc
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
        reply = api.call("TaskList", {})
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
            reply = self.api.call("TaskClaim", {})
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
        if self.team.stop.wait(seconds):
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
            return
        unblocked = [c["taskId"] for c in reply.body["changes"] if c["type"] == "auto_unblock"]
        then = f" → unblocked {', '.join('#' + n for n in unblocked)}" if unblocked else ""
        self.say(f"completed #{number} {subject}{then}")

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
            raise CommandError(f"TaskBatch failed ({reply.status}): {reply.message}")
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


# --- the command ---------------------------------------------------------------------------


class Command(BaseCommand):
    help = (
        "Run a simulated agent team (an orchestrator and N workers) against a running "
        "board, through the HTTP tool API only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--board", default="demo", help="board slug (created if missing)")
        parser.add_argument("--agents", type=int, default=3, help="number of workers")
        parser.add_argument(
            "--speed", type=float, default=1.0, help="work this many times faster (10 = 10x)"
        )
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000", help="address of the running server"
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="decides which tasks fail (default: random)"
        )
        parser.add_argument(
            "--max-seconds", type=float, default=600.0, help="safety stop (exit status 1)"
        )
        parser.add_argument(
            "--token",
            default="",
            help="a team token of the board; without it the command issues one itself "
            "(it must then use the server's database)",
        )

    def handle(self, *args: object, **options: Any) -> None:
        board: str = options["board"]
        agents: int = options["agents"]
        speed: float = options["speed"]
        url: str = options["url"].rstrip("/")
        seed: int = options["seed"] if options["seed"] is not None else random.randrange(10_000)
        max_seconds: float = options["max_seconds"]
        if not 1 <= agents <= 50:
            raise CommandError("--agents: 1 to 50")
        if speed <= 0:
            raise CommandError("--speed must be above 0")
        if max_seconds <= 0:
            raise CommandError("--max-seconds must be above 0")
        started = time.monotonic()
        lock = threading.Lock()

        def write(agent: str, text: str) -> None:
            with lock:
                self.stdout.write(f"{agent:<12} {text}")
                self.stdout.flush()

        try:
            server_check(url, board)
        except ServerUnreachable as exc:
            raise CommandError(
                f"No board server answers at {url} ({exc}). Start one with "
                "'python manage.py up', or pass --url."
            ) from exc
        token, revoke = self.team_token(board, options["token"])
        team = Team(url, board, token, speed, seed, write, verbose=options["verbosity"] > 1)
        try:
            self.check_token(team)
            self.stdout.write(
                f"Demo team on {team.board_url}: orchestrator + {agents} worker(s), "
                f"speed {speed:g}, seed {seed} (repeat with --seed {seed})"
            )
            progress = self.run_team(team, agents, started + max_seconds)
        finally:
            revoke()
        self.summary(progress, time.monotonic() - started)
        if team.errors:
            raise CommandError("; ".join(team.errors))
        if progress is None or not progress.settled:
            waiting = progress is not None and progress.counts()["awaiting approval"] > 0
            raise CommandError(
                f"Stopped after --max-seconds {max_seconds:g} with work still open"
                + (": a task still waits for a person's approval on the board" if waiting else "")
            )

    def team_token(self, slug: str, given: str) -> tuple[str, Callable[[], None]]:
        """The team token the agents use, and how to revoke it when the demo ends."""
        if given:
            return given, lambda: None
        from boards import services
        from boards.models import AgentToken, Board, hash_token

        try:
            board = Board.objects.filter(slug=slug).first()
            if board is None:
                board = services.board_create(
                    slug=slug, name="Demo board" if slug == "demo" else slug
                )
                self.stdout.write(f"Created board {slug!r}.")
            raw = services.token_issue(board=board, team=True, created_by="demo command")
        except DatabaseError as exc:
            raise CommandError(
                f"Could not reach this project's database ({exc}). Run the demo with the "
                "server's DATABASE_URL (after 'python manage.py up'), or pass --token."
            ) from exc
        finally:
            connections.close_all()

        def revoke() -> None:
            try:
                token = AgentToken.objects.filter(token_hash=hash_token(raw)).first()
                if token is not None:
                    services.token_revoke(board=token.board, token_id=token.pk)
            except DatabaseError:
                pass
            finally:
                connections.close_all()

        return raw, revoke

    def check_token(self, team: Team) -> None:
        reply = team.api("orchestrator").call("TaskList", {"view": "ready"})
        if reply.status in (401, 404):
            raise CommandError(
                f"The server at {team.url} does not know this board or token "
                f"({reply.message}). Run the demo against the server's database (the "
                "same DATABASE_URL), or pass --token with a team token of the board."
            )
        if reply.status == 403:
            raise CommandError(f"Token refused: {reply.message}")
        if reply.status != 200:
            raise CommandError(f"TaskList failed ({reply.status}): {reply.message}")

    def run_team(self, team: Team, agents: int, deadline: float) -> Progress | None:
        orchestrator = Orchestrator(team)
        try:
            orchestrator.plan()
        except ServerUnreachable as exc:
            raise CommandError(f"Lost the server: {exc}") from exc
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
            self.stdout.write("Interrupted: the workers put back what they hold…")
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

    def summary(self, progress: Progress | None, elapsed: float) -> None:
        if progress is None:
            self.stdout.write(f"No progress could be read ({elapsed:.1f}s).")
            return
        counts = progress.counts()
        stuck = [t for t in progress.plan if t["id"] in progress.stuck]
        finished = counts["completed"] + counts["failed"] + counts["cancelled"]
        open_ = len(progress.plan) - finished - len(stuck)
        self.stdout.write(
            f"Summary: {len(progress.plan)} tasks — {counts['completed']} completed, "
            f"{counts['failed']} failed, {counts['cancelled']} cancelled, "
            f"{len(stuck)} blocked"
            + (f", {open_} still open" if open_ else "")
            + f" — in {elapsed:.1f}s"
        )
        plan = {t["id"]: t for t in progress.plan}
        for task in progress.plan:
            if task["status"] in DEAD:
                why = task["result"] or task["approval"].get("note") or ""
                self.stdout.write(
                    f"  ✗ #{task['id']} {task['subject']} ({task['status']})"
                    + (f": {why}" if why else "")
                )
        for task in stuck:
            waits = [
                f"#{b}"
                for b in task["blockedBy"]
                if b in progress.stuck or (b in plan and plan[b]["status"] in DEAD)
            ]
            self.stdout.write(f"  ▸ #{task['id']} {task['subject']}: waits on {', '.join(waits)}")
        if progress.settled:
            self.stdout.write("Nothing left can make progress: the demo is over.")

"""A crawler fills every form and query parameter of a board's pages with malformed values,
as each role and as an outsider: never a 5xx, and a refused input changes nothing.

The forms and links are found the way a person finds them, by reading the pages an admin
sees (``<form>`` with its fields and buttons, ``href`` and ``hx-get`` with their query
strings), so a form added to a template is fuzzed without this file changing. The query
parameters the views read are listed too (``READ_PARAMETERS``): a link carries some of
them only once there is enough to page through. Each persona replays what the admin
found: for a role below an action the refusal is its permission check, for an outsider
a 404 (issue #23, item 6).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urljoin, urlsplit

import pytest
from django.test import Client

from boards.core import services
from boards.models import (
    AgentToken,
    Board,
    Delivery,
    Membership,
    Message,
    Role,
    Subscription,
    Task,
    Webhook,
)
from boards.webhooks import subscriptions
from tests.support.factories import make_task, make_token

pytestmark = pytest.mark.slow

# Digits of other scripts (str.isdigit() accepts them; int() refuses "²" and reads "٣" as 3),
# numbers past any column, NaN and Infinity, empty and blank, NUL, long text, dates far off,
# and nested garbage.
FOREIGN = ["²", "٣", "１０"]
MALFORMED = [
    *FOREIGN,
    *("-1", "0", "9" * 20, "9" * 5000, "1e999", "NaN", "Infinity", "-Infinity"),
    *("", "   ", "\x00", "a\x00b", "x" * 10_000, "0001-01-01", "9999-12-31"),
    *("[{" * 2000, '{"a": ' * 500, "%00", "../../etc/passwd", "<script>alert(1)</script>"),
]
# What the personas below admin send: each kind of malformed value once.
FEW = ["²", "٣", "9" * 5000, "\x00", "[{" * 2000]
# The query parameters the views read (boards/views.py, boards/api.py): the pages link some of
# them only once there is enough to page through. The crawl adds any other a link carries.
READ_PARAMETERS = {
    "/boards/team/activity/": ["after", "before", "task", "actor", "kind"],
    "/boards/team/graph/": ["task", "scope"],
    "/boards/team/graph.json": ["task", "scope"],
    "/boards/team/metrics/": ["range", "today"],
    "/boards/team/columns/pending/": ["cursor"],
    "/boards/team/columns/completed/": ["cursor"],
    "/api/boards/team/events": ["after", "limit", "taskId", "actor", "kind"],
    "/api/boards/team/metrics": ["range", "today"],
    "/api/boards/team/tools": ["format", "dialect"],
}
# Posts the views read that no page renders as a form (a message about a task; removing an
# agent shows only once the roster lists one).
READ_FORMS = [
    ("/boards/team/messages/", (("recipient", "alice"), ("body", "hi"), ("task", "1"))),
    ("/boards/team/members/", (("remove_agent", "alice"),)),
]
PERSONAS = [Role.VIEWER, Role.OPERATOR, Role.APPROVER, Role.ADMIN, None]
# Read without a login or token (tool definitions): an outsider's input reaches its checks.
PUBLIC = {"/api/boards/team/tools"}


@dataclass(frozen=True)
class Form:
    """One way to submit a form: its fields' values as rendered, and the button pressed."""

    method: str
    action: str
    fields: tuple[tuple[str, str], ...]

    @property
    def key(self) -> tuple:
        # A task's forms are alike on every task: one of each is enough.
        return (self.method, re.sub(r"/tasks/\d+/", "/tasks/N/", self.action), self.names)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted({n for n, _ in self.fields if n != "csrfmiddlewaretoken"}))


class Page(HTMLParser):
    """The forms and the links of one page."""

    def __init__(self, url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.url = url
        self.forms: list[Form] = []
        self.links: list[str] = []
        self._form: dict | None = None  # the form being read: method, action, fields, buttons
        self._select: str | None = None
        self._chosen = False  # the select being read has a selected option
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for link in (a.get("href"), a.get("hx-get")):
            if link and tag != "link":
                self.links.append(urljoin(self.url, link))
        if tag == "form":
            action = a.get("action") or a.get("hx-post") or self.url
            method = (a.get("method") or ("post" if "hx-post" in a else "get")).lower()
            action = urljoin(self.url, action)
            self._form = {"method": method, "action": action, "fields": [], "buttons": []}
            return
        if tag == "option" and self._form is not None and self._select:
            # The selected option's value, else the first one's.
            fields = self._form["fields"]
            if "selected" in a or not self._chosen:
                fields[-1] = (self._select, a.get("value", ""))
                self._chosen = "selected" in a or self._chosen
            return
        if self._form is not None and tag == "button":
            # A button may add its name and value, and send the form elsewhere (Deny beside
            # Approve: formaction).
            action = a.get("formaction") or a.get("hx-post") or ""
            if a.get("name") or action:
                self._form["buttons"].append((a.get("name", ""), a.get("value", ""), action))
            return
        if self._form is None or not a.get("name"):
            return
        fields, name = self._form["fields"], a["name"]
        if tag == "input":
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            fields.append((name, a.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "select":
            self._select, self._chosen = name, False
            fields.append((name, ""))
        elif tag == "textarea":
            self._textarea = name
            fields.append((name, ""))

    def handle_data(self, data: str) -> None:
        if self._form is not None and self._textarea:
            fields = self._form["fields"]
            fields[-1] = (self._textarea, fields[-1][1] + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None
        elif tag == "form" and self._form is not None:
            form, self._form = self._form, None
            for name, value, action in form["buttons"] or [("", "", "")]:
                pressed = ((name, value),) if name else ()
                target = urljoin(self.url, action) if action else form["action"]
                self.forms.append(Form(form["method"], target, (*form["fields"], *pressed)))


def _same_board(url: str) -> bool:
    path = urlsplit(url).path
    return path.startswith(("/boards/team/", "/api/boards/team/"))


@pytest.fixture
def scene(board, django_user_model) -> Board:
    """A board with something behind every form: tasks in each state (awaiting approval,
    failed, stuck, a child, done), an agent with a token, a message, a webhook with a
    delivery, and a person (sam) to add as a member."""
    make_token(board, "alice")
    make_task(board, "Plain work")  # 1
    gated = make_task(board, "Drop the table", requires_approval=True)  # 2
    services.task_claim(board=board, agent="alice", task_id=gated.number)
    make_task(board, "Broken")  # 3: failed
    make_task(board, "After the broken one", blocked_by=["3"])  # 4: stuck on 3
    make_task(board, "Child", parent_id="1")  # 5
    done = make_task(board, "Done")  # 6
    services.task_update(board=board, actor="alice", task_id=3, status="failed")
    services.task_claim(board=board, agent="alice", task_id=done.number)
    services.task_update(board=board, actor="alice", task_id=done.number, status="completed")
    services.message_send(board=board, sender="pat", recipient="alice", body="hi", task_id=1)
    hook, _ = subscriptions.webhook_add(
        board=board, actor="pat", url="https://example.com/h", kinds=[]
    )
    subscriptions.webhook_test(board=board, actor="pat", webhook_id=hook.pk)
    django_user_model.objects.create_user("sam", password="pw-sam-1234")
    return board


def _state(board: Board) -> tuple:
    """Everything a refused input must leave as it was."""
    board.refresh_from_db()
    return (
        board.last_seq,
        board.task_counter,
        (board.lease_seconds, board.max_attempts, board.budget_usd, board.max_in_progress),
        list(Task.objects.filter(board=board).values_list("number", "status", "owner", "version")),
        list(AgentToken.objects.filter(board=board).values_list("pk", "revoked_at")),
        list(Membership.objects.filter(board=board).values_list("user_id", "role")),
        Message.objects.filter(board=board).count(),
        list(Subscription.objects.filter(board=board).values_list("user_id", "kinds")),
        list(Webhook.objects.filter(board=board).values_list("pk", "active", "secret")),
        Delivery.objects.filter(webhook__board=board).count(),
    )


def _client(django_user_model, board: Board, role: Role | None) -> Client:
    user = django_user_model.objects.create_user(f"as-{role or 'outsider'}", password="pw-x-12345")
    if role is not None:
        Membership.objects.create(board=board, user=user, role=role)
    # A server error is a finding to list with the others, not an exception that ends the crawl.
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def crawl(client: Client, start: str) -> tuple[list[Form], dict[str, set[str]]]:
    """The forms (one of each kind) and query parameters reachable from ``start``."""
    seen: set[str] = set()
    queue = [start]
    forms: dict[tuple, Form] = {}
    queries: dict[str, set[str]] = {path: set(names) for path, names in READ_PARAMETERS.items()}
    for path, fields in READ_FORMS:
        form = Form("post", urljoin(start, path), fields)
        forms[form.key] = form
    while queue:
        url = queue.pop(0)
        path = urlsplit(url).path
        if path in seen:
            continue
        seen.add(path)
        response = client.get(url)
        assert response.status_code < 500, (url, response.status_code)
        if "html" not in response.get("Content-Type", ""):
            continue
        page = Page(url)
        page.feed(response.content.decode())
        for form in page.forms:
            if form.method in ("get", "post") and _same_board(form.action):
                forms.setdefault(form.key, form)
        for link in page.links:
            if not _same_board(link):
                continue
            split = urlsplit(link)
            if split.query:
                queries.setdefault(split.path, set()).update(k for k, _ in parse_qsl(split.query))
            if split.path.endswith(("/reset/", "/delete/")) or "/revoke/" in split.path:
                continue  # a link never deletes, but do not follow one that looks like it
            queue.append(link)
    return list(forms.values()), queries


def _submissions(form: Form, values: list[str]) -> Iterator[tuple[str, dict[str, list[str]]]]:
    """The form once per field and value: that field malformed, the others as rendered;
    and each field sent twice (a list where one value is expected)."""
    rendered: dict[str, list[str]] = {}
    for name, value in form.fields:
        rendered.setdefault(name, []).append(value)
    for name in form.names:
        for value in values:
            yield name, {**rendered, name: [value]}
        yield name, {**rendered, name: [values[0], "1"]}


@pytest.mark.parametrize("role", PERSONAS, ids=[*PERSONAS[:-1], "outsider"])
def test_malformed_values_in_every_form_and_query_never_500_and_refusals_change_nothing(
    scene, django_user_model, role
):
    admin = _client(django_user_model, scene, Role.ADMIN) if role != Role.ADMIN else None
    client = _client(django_user_model, scene, role)
    forms, queries = crawl(admin or client, "http://testserver/boards/team/")
    # The crawl found what the pages offer (a template losing its forms would pass silently).
    actions = {re.sub(r"/tasks/\d+/", "/tasks/N/", urlsplit(f.action).path) for f in forms}
    for expected in ("settings/", "members/", "webhooks/", "tokens/", "messages/", "notify/"):
        assert f"/boards/team/{expected}" in actions, sorted(actions)
    for action in ("status", "reassign", "priority", "unblock", "message", "approve", "deny"):
        assert f"/boards/team/tasks/N/{action}/" in actions, sorted(actions)

    values = MALFORMED if role == Role.ADMIN else FEW
    problems: list[str] = []
    before = _state(scene)

    def check(method: str, path: str, data: dict, response) -> None:
        nonlocal before
        status = response.status_code
        if status >= 500:
            problems.append(f"{status} {method} {path} {data!r:.300}")
        after = _state(scene)
        if status >= 400 and after != before:
            problems.append(f"refused {status} yet changed: {method} {path} {data!r:.300}")
        if role is None and status != 404 and path not in PUBLIC:
            problems.append(f"an outsider got {status}: {method} {path}")
        before = after

    for path, names in sorted(queries.items()):
        for name in sorted(names):
            for value in values:
                response = client.get(path, {name: value})
                check("GET", path, {name: value}, response)
    for form in forms:
        path = urlsplit(form.action).path
        for _, data in _submissions(form, values):
            if form.method == "get":
                response = client.get(path, data)
            else:
                response = client.post(path, data, headers={"HX-Request": "true"})
            check(form.method.upper(), path, data, response)

    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
    assert (admin or client).get("/boards/team/").status_code == 200

"""The canonical tools as a Model Context Protocol server: ``/mcp/<slug>/`` (streamable HTTP).

Built on the official ``mcp`` SDK: its low-level ``Server`` (``tools/list`` and
``tools/call`` handlers) behind its ``StreamableHTTPSessionManager``, which speaks
the transport (JSON-RPC framing, ``initialize``, protocol versions, errors). This
module only adds what is ours, the same way ``boards.agents.http`` does for plain HTTP:

- the token is checked before the SDK sees the request (401/403 with our error
  JSON), with ``auth.authenticate``, so the identity rules are the same
  (a bound agent, or a team token and ``X-Agent``), and the agent is noted as having
  called (``auth.agent_called``) once per request;
- every tool is a canonical one of the registry (``pipeline.listed()``, declared by
  ``@tool`` on its handler) with its description, hints and JSON Schemas, validated
  by the same pydantic model, run by the same handler (the tool pipeline,
  ``pipeline.call``), so all writes go through the services; the answer JSON (with ``unreadMessages``) is the text content and the
  structured content of the result;
- a refused call (``ServiceError``, invalid input) is a tool error
  (``isError: true``) whose text is the HTTP API's ``{"error": {...}}`` JSON (as text
  only: structured content is the answer the output schema describes).

Stateless, one server per request. The caller is fixed by the request's token, so
each HTTP request gets its own ``Server`` whose handlers close over that caller, and
its own session manager in stateless JSON mode, run for just that request. This
needs no process-wide state: no ``Mcp-Session-Id`` to keep in one process's memory
(several daphne processes behind one address serve any request, SPEC §6), and no
long-lived task group. The manager needs its task group running (``run()``) even
in stateless mode, and the usual place, the ASGI lifespan, is not dependable here:
daphne sends no lifespan events and Channels' ``ProtocolTypeRouter`` refuses them.
Entering ``run()`` around the one request gives the task group a structured
lifetime inside the request's own task instead (rather than one manager started
lazily by the first request: a background task outliving every request, bound to
one event loop, never shut down cleanly, holding sessions in memory). The tools need no server-to-client
messages (no sampling, elicitation or notifications), so nothing is lost; a GET
(the optional server-to-client SSE stream) is answered 405, as the transport allows.
"""

from __future__ import annotations

import json
import logging
import re
import time
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from boards.agents import pipeline, schemas
from boards.core import auth, selectors
from boards.core.errors import InvalidInput, MethodNotAllowed, NotFound, ServiceError, error_body
from boards.core.limits import body_limit, json_problem
from boards.core.origins import expected_origins

logger = logging.getLogger(__name__)

PATH = re.compile(r"^/mcp/(?P<slug>[-a-zA-Z0-9_]+)/?$")
try:
    VERSION = version("agent-kanban")
except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
    VERSION = "0"


def _mcp_tool(tool: pipeline.Tool) -> types.Tool:
    hints = tool.hints
    assert hints is not None  # every canonical tool declares its hints
    return types.Tool(
        name=tool.name,
        title=hints.title,
        description=tool.description,
        input_schema=tool.input_schema(),
        output_schema=tool.output_schema(),
        annotations=types.ToolAnnotations(
            title=hints.title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=False,
        ),
    )


@cache
def mcp_tools() -> list[types.Tool]:
    return [_mcp_tool(tool) for tool in pipeline.listed()]


@cache
def _input_schemas() -> dict[str, dict[str, Any]]:
    return {tool.name: tool.input_schema() for tool in pipeline.listed()}


def _input_schema(name: str) -> dict[str, Any] | None:
    return _input_schemas().get(name)


def _result(body: dict[str, Any], *, error: bool = False) -> types.CallToolResult:
    text = json.dumps(body, ensure_ascii=False)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        # A refusal is text only: structured content must match the tool's output schema,
        # which describes its answer (the TypeScript SDK checks it on errors too, and
        # would turn the refusal into a protocol error the agent never sees).
        structured_content=None if error else body,
        is_error=error,
    )


async def call_tool(
    caller: auth.Caller, tool: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    """Run one canonical tool for ``caller``; a refusal is a tool error with the API's error JSON."""
    try:
        answer = await pipeline.call(caller, tool, arguments, seed_dialects=False)
    except ServiceError as exc:
        return _result(error_body(exc), error=True)
    return _result(answer.body)


async def _watch_with_progress(
    ctx: ServerRequestContext[Any], caller: auth.Caller, arguments: dict[str, Any]
) -> types.CallToolResult:
    """A TaskWatch that tells the client it is still waiting, every few seconds.

    Clients give up on a request after their own timeout (60 s in the TypeScript SDK);
    those that reset it on progress (``resetTimeoutOnProgress``) then wait out any watch.
    Progress is the seconds waited so far, of the watch's timeout; its message also
    counts the agent's unread messages from people, as every answer does.
    """
    every = float(settings.KANBAN_MCP_PROGRESS_SECONDS)
    limit = arguments.get("timeoutSeconds", schemas.WATCH_DEFAULT_SECONDS)
    total = float(limit) if isinstance(limit, int | float) and not isinstance(limit, bool) else None
    started = time.monotonic()

    unread_count = database_sync_to_async(selectors.unread_count)
    waiting_for = f"Still waiting for task {arguments.get('taskId')!s:.20}"

    async def tick() -> None:
        while True:
            await anyio.sleep(every)
            waited = round(time.monotonic() - started, 1)
            # The stateless transport has no stream for resource notifications; a message
            # from a person during a long wait is told here, in the progress message.
            unread = await unread_count(caller.board, caller.agent)
            news = f"; {unread} unread message{'s' if unread != 1 else ''} (InboxRead)"
            await ctx.session.report_progress(waited, total, waiting_for + (news if unread else ""))

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        try:
            result = await call_tool(caller, "TaskWatch", arguments)
        finally:
            group.cancel_scope.cancel()
    return result


# -- resources and prompts ------------------------------------------------------------------

RESOURCE_SCHEME = "kanban"
TASK_URI = re.compile(r"^kanban://(?P<slug>[-a-zA-Z0-9_]+)/tasks/(?P<id>\d{1,9})$")


def _uri(caller: auth.Caller, path: str) -> str:
    return f"{RESOURCE_SCHEME}://{caller.board.slug}/{path}"


def _resources(caller: auth.Caller) -> list[types.Resource]:
    return [
        types.Resource(
            uri=_uri(caller, "summary"),
            name="summary",
            title="The board at a glance",
            description="Counts, the tasks ready to claim, your tasks and your unread messages.",
            mime_type="text/plain",
        ),
        types.Resource(
            uri=_uri(caller, "inbox"),
            name="inbox",
            title="Your unread messages from people",
            description="Reading it does not mark them read (InboxRead with ack does).",
            mime_type="application/json",
        ),
    ]


async def _answer(caller: auth.Caller, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return (await pipeline.call(caller, tool, arguments, seed_dialects=False)).body


async def board_summary(caller: auth.Caller) -> str:
    """The summary resource: what an agent wants to know before it calls anything."""
    ready = await _answer(caller, "TaskList", {"view": "ready", "format": "text", "limit": 20})
    mine = await _answer(
        caller, "TaskList", {"view": "in_progress", "owner": caller.agent, "format": "text"}
    )
    inbox = await _answer(caller, "InboxRead", {"ack": False})
    counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in ready["counts"].items())
    lines = [
        f"Board {caller.board.name!r} ({caller.board.slug}); you are {caller.agent!r}.",
        f"Counts: {counts}.",
        f"Ready to claim ({ready['total']}):",
        ready["text"] or "  (none)",
        f"Yours in progress ({mine['total']}):",
        mine["text"] or "  (none)",
        f"Unread messages from people: {len(inbox['messages'])}.",
    ]
    for message in inbox["messages"][:5]:
        about = f" about #{message['taskId']}" if message["taskId"] else ""
        lines.append(f"  {message['from']}{about}: {message['body'][:200]}")
    return "\n".join(lines)


async def read_resource(caller: auth.Caller, uri: str) -> types.ReadResourceResult:
    def text(body: str, mime: str) -> types.ReadResourceResult:
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=body)]
        )

    try:
        if uri == _uri(caller, "summary"):
            return text(await board_summary(caller), "text/plain")
        if uri == _uri(caller, "inbox"):
            inbox = await _answer(caller, "InboxRead", {"ack": False})
            return text(json.dumps(inbox, ensure_ascii=False), "application/json")
        match = TASK_URI.match(uri)
        if match and match["slug"] == caller.board.slug:
            task = await _answer(caller, "TaskGet", {"taskId": match["id"]})
            return text(json.dumps(task, ensure_ascii=False), "application/json")
    except ServiceError as exc:
        raise MCPError(types.INVALID_PARAMS, exc.message) from exc
    raise MCPError(
        types.INVALID_PARAMS, f"Unknown resource {uri[:120]!r}; resources/list names them"
    )


PROMPTS = [
    types.Prompt(
        name="work-next-task",
        title="Work the next ready task",
        description="Claim the next ready task, do it, report as you go, and complete it.",
    ),
    types.Prompt(
        name="plan-goal",
        title="Plan a goal as one TaskBatch",
        description="Break a goal into tasks with their order, created in one TaskBatch.",
        arguments=[
            types.PromptArgument(
                name="goal", description="What the team should achieve.", required=True
            )
        ],
    ),
]

WORK_NEXT = """Work the next task on the board:
1. Call TaskClaim without a taskId: it claims the ready task of highest priority. If it answers
   "No task is ready to claim", read the board summary resource and stop.
2. If the answer says awaitingApproval, a person must approve first: call TaskWatch on that task
   (again each time it answers timedOut: true) and continue once it is approved; stop if denied.
3. Do the work the task's subject, description and prompt ask for. While you work, call TaskUpdate
   with activeForm (what you are doing now) and notes; report what the work cost in usage
   ({{"inputTokens", "outputTokens", "costUsd", "model"}}). Any call keeps your claim alive.
4. Finish with TaskUpdate status "completed" and a result a person can read; if you cannot finish,
   status "failed" with notes saying why.
5. Check InboxRead for messages from people before you take the next task.
You are {agent} on the board {board}."""

PLAN_GOAL = """Plan this goal for the team on the board {board}: {goal}

Make one TaskBatch call with an op "create" per concrete step: an imperative subject, a
description, and a prompt with full instructions for whoever does it. Give each op a ref
("r1", "r2", …) and express ordering with blockedBy (refs of the steps that must complete first),
never in the text. Group sub-steps under a parent step with parentId. Mark steps a person must
approve before they start with requiresApproval: true, and urgent ones with priority. Then read
the answer's operations for the new ids and check TaskList view "ready" shows the first steps."""


async def get_prompt(
    caller: auth.Caller, name: str, arguments: dict[str, str]
) -> types.GetPromptResult:
    board = f"{caller.board.name!r} ({caller.board.slug})"
    if name == "work-next-task":
        text = WORK_NEXT.format(agent=repr(caller.agent), board=board)
    elif name == "plan-goal":
        goal = (arguments.get("goal") or "").strip()
        if not goal:
            raise MCPError(types.INVALID_PARAMS, "plan-goal needs the argument goal")
        text = PLAN_GOAL.format(board=board, goal=goal[:4000])
    else:
        raise MCPError(
            types.INVALID_PARAMS, f"Unknown prompt {name[:80]!r}; prompts/list names them"
        )
    return types.GetPromptResult(
        description=next(p.description for p in PROMPTS if p.name == name),
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        ],
    )


def build_server(caller: auth.Caller) -> Server[Any]:
    """An MCP server serving the canonical tools to one authenticated caller."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=mcp_tools())

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if pipeline.find(params.name, seed_dialects=False) is None:
            # A tool that does not exist is the client's protocol mistake, not a tool error.
            raise MCPError(
                types.INVALID_PARAMS,
                f"Unknown tool {params.name[:80]!r}; tools/list names the tools",
            )
        arguments = params.arguments or {}
        if params.name == "TaskWatch" and ctx.meta and ctx.meta.get("progress_token") is not None:
            return await _watch_with_progress(ctx, caller, arguments)
        return await call_tool(caller, params.name, arguments)

    async def on_list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=_resources(caller))

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=_uri(caller, "tasks/{id}"),
            name="task",
            title="A task",
            description="One task as TaskGet answers it (JSON).",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await read_resource(caller, str(params.uri))

    async def on_list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=PROMPTS)

    async def on_get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return await get_prompt(caller, params.name, dict(params.arguments or {}))

    board = caller.board
    return Server(
        "agent-kanban",
        version=VERSION,
        title="Agent Kanban",
        instructions=(
            f"The task board {board.name!r}, shared with people and other agents; you are "
            f"{caller.agent!r}. TaskList (view 'ready') finds work, TaskClaim takes it (without "
            "taskId: the next ready task), TaskUpdate with status 'completed' and a result "
            "finishes it. Every answer counts your unread messages from people (InboxRead)."
        ),
        get_tool_input_schema=_input_schema,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
    )


def _host_allowed(headers: Headers) -> bool:
    """Django's ALLOWED_HOSTS check, which this route (outside Django's handler) would miss.

    It is also the DNS-rebinding protection the MCP transport asks for; the SDK's own
    (``TransportSecuritySettings``) is left off so that one list rules the whole site.
    """
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # as HttpRequest.get_host()
    domain, _ = split_domain_port(headers.get("host", ""))
    return bool(domain) and validate_host(domain, allowed)


async def _refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> None:
    await JSONResponse(body, status_code=status, headers=headers)(scope, receive, send)


async def _peek_body(receive: Receive) -> tuple[list[Message], Receive]:
    """Read the request's body (up to the size limit), and a ``receive`` that replays it.

    How to answer (one JSON object, or a stream that can carry progress first) depends
    on what is asked, and the SDK decides that before it reads the body.
    """
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body") or size > body_limit():
            break
    queued = list(messages)

    async def replay() -> Message:
        return queued.pop(0) if queued else await receive()

    return messages, replay


def _wants_progress(body: bytes, headers: Headers) -> bool:
    """A TaskWatch call with a progressToken, from a client that accepts a streamed answer.

    Only then is the answer a stream (progress notifications, then the result); every
    other request keeps its single JSON answer, which any client reads. ``body`` is
    within the size limit and passed ``limits.json_problem``.
    """
    if "text/event-stream" not in headers.get("accept", ""):
        return False
    try:
        request = json.loads(body)
    except ValueError:
        return False
    if not isinstance(request, dict) or request.get("method") != "tools/call":
        return False
    params = request.get("params")
    if not isinstance(params, dict) or params.get("name") != "TaskWatch":
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and isinstance(meta.get("progressToken"), str | int)


async def mcp_app(scope: Scope, receive: Receive, send: Send) -> None:
    """ASGI app for ``/mcp/<slug>`` and ``/mcp/<slug>/`` (HTTP only)."""
    assert scope["type"] == "http"
    match = PATH.match(scope["path"])
    if match is None:
        body = error_body(NotFound("The MCP endpoint of a board is /mcp/<board-slug>/"))
        return await _refuse(scope, receive, send, 404, body)
    headers = Headers(scope=scope)
    if not _host_allowed(headers):
        refusal = InvalidInput(
            "Invalid Host header; see ALLOWED_HOSTS", field="Host", code="disallowed_host"
        )
        return await _refuse(scope, receive, send, 400, error_body(refusal))
    origin = headers.get("origin", "").strip().lower().rstrip("/")
    if origin and origin not in expected_origins(scope):
        # A browser page of another origin (DNS rebinding, a malicious site): 403, as the
        # transport requires. Clients that are not browsers send no Origin.
        body = {"error": {"code": "forbidden_origin", "message": f"Origin {origin!r} refused"}}
        return await _refuse(scope, receive, send, 403, body)
    # Like Django's ASGI handler: this request's sync code gets a thread of its own,
    # so concurrent MCP requests do not queue behind one another on a single thread.
    async with ThreadSensitiveContext():
        try:
            await _serve(scope, receive, send, match["slug"], headers)
        finally:
            # Every answer, refusals too, gives the request's connection back, as Django's
            # request_finished does for its own requests.
            await sync_to_async(close_old_connections)()


async def _serve(scope: Scope, receive: Receive, send: Send, slug: str, headers: Headers) -> None:
    """Authenticate the caller, then hand a POST to their MCP server (one per request)."""
    try:
        caller = await database_sync_to_async(auth.caller_from_request)(headers, slug)
    except ServiceError as exc:
        extra = auth.challenge(exc, headers)
        return await _refuse(scope, receive, send, exc.status, error_body(exc), extra)
    if scope["method"] != "POST":
        wrong = MethodNotAllowed("This MCP server is stateless: POST only")
        return await _refuse(
            scope, receive, send, wrong.status, error_body(wrong), {"Allow": wrong.allow}
        )
    messages, receive = await _peek_body(receive)
    raw = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
    # Over the limit, the SDK answers 413 without parsing it.
    small = len(raw) <= body_limit()
    problem = json_problem(raw) if small else None
    if problem:
        # As the SDK answers a body it cannot parse: a JSON-RPC parse error, HTTP 400.
        error = {"code": types.PARSE_ERROR, "message": f"Parse error: {problem}"}
        refusal = {"jsonrpc": "2.0", "id": None, "error": error}
        return await _refuse(scope, receive, send, 400, refusal)
    manager = StreamableHTTPSessionManager(
        app=build_server(caller),
        stateless=True,
        json_response=not (small and _wants_progress(raw, headers)),
        max_request_body_size=body_limit(),
    )
    async with manager.run():
        await manager.handle_request(scope, receive, send)

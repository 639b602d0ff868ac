"""The official MCP conformance suite's server scenarios against ``/mcp/<slug>/``.

``@modelcontextprotocol/conformance`` (pinned in ``tests/node``, installed by the
``node_packages`` fixture) connects to a server as an MCP client, runs a scenario and
writes its checks (``checks.json``: SUCCESS, FAILURE, WARNING or INFO each). Its
client sends no credentials, and our endpoint needs a bearer token, so the suite talks
to a small proxy started here, used by this module only: it adds ``Authorization:
Bearer <token>`` to each request and passes everything else through unchanged, Host
and Origin included (so ``dns-rebinding-protection`` still tests the server's own
Host/Origin checks), streaming the answers back as they come.

Scenarios run here, the ones that apply to a board's server:

- ``server-initialize``, ``ping``, ``tools-list``, ``resources-list``, ``prompts-list``;
- ``dns-rebinding-protection``: a request with ``Host``/``Origin`` of
  ``evil.example.com`` gets a 4xx, one with the server's own host a 2xx.

Not run, and why (``node tests/node/conformance.mjs list --server`` lists them all):

- written against the suite's own reference server, calling tools, resources and
  prompts by its fixture names (``test_simple_text``, ``test://static-text``,
  ``test_simple_prompt``, …), which a board does not have: ``tools-call-simple-text``,
  ``tools-call-image``, ``tools-call-audio``, ``tools-call-embedded-resource``,
  ``tools-call-mixed-content``, ``tools-call-error``, ``tools-call-with-progress``
  (our progress is TaskWatch's, tests/agents/test_mcp_node.py), ``json-schema-2020-12``
  (looks for its own tool), ``resources-read-text``, ``resources-read-binary``,
  ``resources-templates-read`` (reads ``test://template/123/data``; ours is
  ``kanban://<slug>/tasks/{id}``), ``prompts-get-simple``, ``prompts-get-with-args``,
  ``prompts-get-embedded-resource``, ``prompts-get-with-image``;
- capabilities the server does not offer: ``logging-set-level`` and
  ``tools-call-with-logging`` (no logging), ``completion-complete`` (no completions),
  ``resources-subscribe`` / ``resources-unsubscribe`` (no subscriptions: stateless),
  ``tools-call-sampling``, ``tools-call-elicitation``, ``elicitation-sep1034-defaults``,
  ``elicitation-sep1330-enums`` (no server-to-client requests);
- ``server-sse-polling`` and ``server-sse-multiple-streams`` (SEP-1699): they need a
  session (``Mcp-Session-Id``) and resumable SSE streams with event ids (and call the
  reference server's ``test_reconnection`` tool); the server is stateless and answers
  GET with 405, so against it they end in a WARNING ("Server did not provide session
  ID") with nothing passed or failed.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from devtools.liveserver import Cluster
from tests.agents.test_mcp_node import node_packages, run_node

__all__ = ["node_packages"]  # the fixture, shared with tests/agents/test_mcp_node.py

# One server for the module (``target``): with -n, its tests run on one worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_mcp_conformance")]

SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
]
SCENARIO_SECONDS = 60

SETUP = """
import io
from django.core.management import call_command

call_command("createboard", "conform", stdout=io.StringIO())
out = io.StringIO()
call_command("issuetoken", "conform", "conformance", stdout=out)
print(out.getvalue().strip().splitlines()[-1])
"""

# Not forwarded: they describe one hop (RFC 9110 §7.6.1), and the proxy makes its own.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


class BearerProxy(ThreadingHTTPServer):
    """Forwards every request to ``upstream`` with ``Authorization: Bearer <token>`` added."""

    daemon_threads = True

    def __init__(self, upstream_port: int, token: str) -> None:
        self.upstream_port = upstream_port
        self.token = token
        super().__init__(("127.0.0.1", 0), _ProxyHandler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _ProxyHandler(BaseHTTPRequestHandler):
    server: BearerProxy
    protocol_version = "HTTP/1.1"

    def do_request(self) -> None:
        # Each answer ends by closing the connection, so a streamed answer needs no framing.
        self.close_connection = True
        body = self._body()
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=120)
        try:
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in HOP_BY_HOP | {"content-length", "authorization"}:
                    upstream.putheader(name, value)  # Host and Origin as the client sent them
            upstream.putheader("Authorization", f"Bearer {self.server.token}")
            upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            response = upstream.getresponse()
            self.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            while chunk := response.read1(65536):  # as it arrives: SSE events one by one
                self.wfile.write(chunk)
                self.wfile.flush()
        except (OSError, http.client.HTTPException):
            pass  # the client or the server went away: the connection closes
        finally:
            upstream.close()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    do_GET = do_POST = do_DELETE = do_OPTIONS = do_HEAD = do_request

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the conformance suite's report says what happened


@dataclass
class Target:
    """The board's MCP endpoint as the suite reaches it (through the proxy), and directly."""

    url: str
    direct_url: str
    token: str


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    cluster = Cluster(tmp_path_factory.mktemp("mcp-conformance"))
    proxy: BearerProxy | None = None
    try:
        token = cluster.manage("shell", "-c", SETUP).splitlines()[-1]
        base = cluster.start()
        proxy = BearerProxy(int(base.rsplit(":", 1)[1]), token)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        yield Target(f"http://127.0.0.1:{proxy.port}/mcp/conform/", f"{base}/mcp/conform/", token)
    finally:
        if proxy is not None:
            proxy.shutdown()
            proxy.server_close()
        cluster.stop()
    log = cluster.log(base)
    assert "Traceback" not in log, log


def run_scenario(url: str, scenario: str, out: Path) -> tuple[int, list[dict[str, Any]], str]:
    """One server scenario of the suite against ``url``: its exit code, checks and output."""
    result = run_node(
        "conformance.mjs",
        "server",
        "--url",
        url,
        "--scenario",
        scenario,
        "--output-dir",
        str(out),
        env={"NO_COLOR": "1"},
        timeout=SCENARIO_SECONDS,
    )
    output = f"{result.stdout}\n{result.stderr}"
    found = sorted(out.glob("*/checks.json"))
    assert len(found) == 1, f"{scenario}: no checks.json in {out}\n{output}"
    return result.returncode, json.loads(found[0].read_text()), output


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario_passes(
    node_packages: Path, target: Target, scenario: str, tmp_path: Path
) -> None:
    code, checks, output = run_scenario(target.url, scenario, tmp_path)
    failed = [c for c in checks if c["status"] == "FAILURE"]
    assert not failed, json.dumps(failed, indent=2)
    assert code == 0, output
    passed = {c["id"] for c in checks if c["status"] == "SUCCESS"}
    assert passed, output
    warnings = [c for c in checks if c["status"] == "WARNING"]
    assert not warnings, json.dumps(warnings, indent=2)
    if scenario == "dns-rebinding-protection":
        assert passed == {"localhost-host-rebinding-rejected", "localhost-host-valid-accepted"}


def test_the_suite_needs_the_proxy(node_packages: Path, target: Target, tmp_path: Path) -> None:
    """Straight to the server, without a token, the suite's client is refused: the
    scenarios above pass through the proxy's token, not around the token check."""
    code, checks, _ = run_scenario(target.direct_url, "server-initialize", tmp_path)
    assert code != 0
    assert [c["status"] for c in checks] == ["FAILURE"]
    assert '"code":"unauthorized"' in checks[0]["errorMessage"], checks


def test_the_proxy_passes_host_and_origin_through(target: Target) -> None:
    """What makes dns-rebinding-protection mean something here: the server, not the proxy,
    refuses a foreign Host (400) and a foreign Origin (403)."""
    port = int(target.url.split(":")[2].split("/")[0])
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    statuses = {}
    for case, headers in {
        "host": {"Host": "evil.example.com"},
        "origin": {"Host": f"127.0.0.1:{port}", "Origin": "http://evil.example.com"},
    }.items():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request(
                "POST",
                "/mcp/conform/",
                body=ping,
                headers={
                    **headers,
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            )
            response = connection.getresponse()
            statuses[case] = (response.status, json.loads(response.read())["error"]["code"])
        finally:
            connection.close()
    assert statuses == {
        "host": (400, "disallowed_host"),
        "origin": (403, "forbidden_origin"),
    }

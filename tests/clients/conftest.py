"""Fixtures the coding clients' tests share. A module's own fixture of the same name
overrides one of these (``test_doors`` and ``test_ran_ungated`` have their own board and
their agent ``dev``)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.factories import make_token


@pytest.fixture
def token(board) -> str:
    """The token of the agent ``claude`` on the ``board`` fixture."""
    return make_token(board, "claude")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A home of the test's own for ``connect``, with nothing of the person's in it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # nothing installed unless a test says
    for name in ("XDG_CONFIG_HOME", "CODEX_HOME", "COPILOT_HOME", "KANBAN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def closed_url() -> str:
    """A loopback hook URL on which nothing listens (connection refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/boards/ops/hooks/claude-code"


@pytest.fixture(scope="module")
def opencode_cache(tmp_path_factory) -> Path:
    # opencode installs its provider package from npm on a first run: once for the module.
    return tmp_path_factory.mktemp("opencode-cache")

"""A coding client is its adapter, its row and its test (issue #43): what connect writes,
what the Connect page lists, what the gate's supervision rule protects and which tools it
reads by kind all come from the client's row in ``registry.CLIENTS``. Every check here
runs over every row, so a new client's row is held to them without editing this file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from boards.clients import forwarder, registry, setup
from boards.gates import matching

ROWS = [pytest.param(row, id=row.name) for row in registry.CLIENTS]


def test_the_forwarder_knows_the_same_clients_as_the_registry():
    # The forwarder imports no Django, so it keeps its own list: a client missing there
    # is refused by ``kanban-hook --client NAME`` on every call.
    assert forwarder.CLIENTS == registry.NAMES


def _home(tmp_path: Path) -> setup.Home:
    return setup.Home(home=tmp_path / "home", env={}, root=tmp_path / "root")


def _asked(tool: str, tool_input: dict, cwd: str) -> bool:
    return matching.first_match([], tool, tool_input, cwd) is matching.SUPERVISION_RULE


@pytest.mark.parametrize("row", ROWS)
def test_what_connect_writes_for_a_client_the_gate_always_asks_about(row, tmp_path):
    home = _home(tmp_path)
    scopes = [False, True] if row.settings.system else [False]
    for system in scopes:
        change = setup.client_change(
            row.name, home, hook="kanban-hook", remove=False, system=system
        )
        setup.apply(change)
        assert change.path.is_file()
        # Written as the agent would see it: the home folder, or the machine's root.
        base = home.root if system else home.home
        seen = "/" + str(change.path.relative_to(base)) if system else str(change.path)
        cwd = "/" if system else str(home.home / "project")
        assert _asked("Write", {"file_path": seen, "content": "{}"}, cwd), seen
        assert _asked("Bash", {"command": f"echo '{{}}' > {seen}"}, cwd), seen
        if change.path.suffix == ".json":
            written = json.loads(change.path.read_text())
            assert "kanban-hook --client " + row.name in json.dumps(written)


@pytest.mark.parametrize("row", ROWS)
def test_the_gate_asks_before_a_write_into_each_of_the_clients_folders(row):
    assert row.folders, "a client's row names the folders its settings and hooks live in"
    for folder in row.folders:
        path = folder if folder.startswith("/") else f"/home/ann/{folder}"
        assert _asked("Write", {"file_path": f"{path}/settings.json", "content": "{}"}, "/w")
        # A line that names the folder in a write the reader cannot list is asked too.
        assert _asked("Bash", {"command": f"git checkout-index --prefix={path}/ -a"}, "/w")
    # A folder beside one of them is no one's supervision.
    assert not _asked("Write", {"file_path": "/home/ann/project/notes.md", "content": ""}, "/w")


@pytest.mark.parametrize("row", ROWS)
def test_each_of_the_clients_own_tool_names_is_read_by_its_kind(row):
    for kind, names in row.tool_kinds.items():
        for name in names:
            assert matching.kind_of(name) == kind, name


@pytest.mark.parametrize("row", ROWS)
def test_connect_finds_the_client_by_its_binary_on_path(row, tmp_path):
    binary = tmp_path / row.binary
    binary.write_text("#!/bin/sh\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    assert setup.installed({"PATH": str(tmp_path)}) == [row.name]
    assert setup.installed({"PATH": os.devnull}) == []


def test_the_connect_page_lists_every_client_with_where_connect_writes(board, person_client):
    page = person_client.get("/boards/team/connect/").content.decode()
    for row in registry.CLIENTS:
        assert row.display in page
        writes = row.settings.writes().replace("'", "&#x27;")
        assert f"<code>{writes}</code>" in page, row.name

"""The runner's place (SPEC §16, issue #43): the program people run imports nothing of
the board, so it runs on a machine with none of the board's dependencies."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys

import boards.runner
from devtools.liveserver import ROOT

BOARD_SIDE = ("django", "pydantic", "channels", "kanban", "boards.core", "boards.models")


def test_the_runner_imports_no_django_and_nothing_of_the_board():
    modules = ["boards.runner"] + [
        f"boards.runner.{m.name}" for m in pkgutil.walk_packages(boards.runner.__path__)
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=30,
        check=True,
    )
    loaded = result.stdout.split()
    assert "boards.runner" in loaded
    leaked = [m for m in loaded if m.split(".")[0] in BOARD_SIDE or m.startswith(BOARD_SIDE)]
    assert leaked == [], leaked
    # Of the board's own package, only the runner itself (and the package around it).
    assert {m for m in loaded if m.startswith("boards.")} <= {
        m for m in loaded if m.startswith("boards.runner")
    }

"""npm packages the tests drive (tests/node, tests/claude), installed from their lock files."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

NPM_CI_SECONDS = 300


def node_modules_current(directory: Path) -> bool:
    """``directory/node_modules`` holds every package of its package-lock.json at its version.

    npm keeps what it installed in ``node_modules/.package-lock.json``; a missing or older
    install (the lock file changed since) differs from the committed lock file. Optional
    packages for other platforms are in the lock file but never installed.
    """
    try:
        wanted = json.loads((directory / "package-lock.json").read_text())["packages"]
        have = json.loads((directory / "node_modules" / ".package-lock.json").read_text())[
            "packages"
        ]
    except (OSError, ValueError, KeyError):
        return False
    return all(
        have.get(path, {}).get("version") == entry.get("version")
        for path, entry in wanted.items()
        if path  # "" is the package itself
        and not (entry.get("optional") and path not in have)
    )


def npm_ci(directory: Path) -> Path:
    """``directory`` with its node_modules installed (``npm ci`` when missing or outdated).

    Skips the calling test when node or npm is not on PATH; one install at a time,
    whichever process asks.
    """
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH: {directory.name} runs in Node")
    lock = Path(tempfile.gettempdir()) / f"agent-kanban-tests-{directory.name}.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not node_modules_current(directory):
            result = _npm("ci", directory)
            if result.returncode != 0 and "EUSAGE" in result.stderr:
                # The lock lists other platforms' optional packages this registry lacks
                # (Qwen Code, opencode): npm install keeps to the lock's versions.
                result = _npm("install", directory, "--no-save")
            if result.returncode != 0 or not node_modules_current(directory):
                raise RuntimeError(
                    f"npm ci in {directory} failed ({result.returncode}):\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
                )
    return directory


def _npm(command: str, directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["npm", command, "--prefix", str(directory), "--no-audit", "--no-fund", *extra],
        capture_output=True,
        text=True,
        timeout=NPM_CI_SECONDS,
        check=False,
    )

"""What the seed dialects share: their names, and the answer that is a bare JSON value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boards.agents.handlers import Answer

SEED002, SEED003 = "seed002", "seed003"
DIALECTS = (SEED002, SEED003)


@dataclass
class BareAnswer(Answer):
    """An answer that is a bare JSON value, not an object (seed 002's ``"ok"`` and list)."""

    body: Any = None

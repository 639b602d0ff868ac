"""The seeds' own tool sets on the tool endpoint (SPEC §4 "Seed dialects").

Agents written for seed 002 or seed 003 call ``POST /api/boards/<slug>/tools/<name>``
with their own tool names, field names and answer shapes. Each tool here is declared
like a canonical one (``@tool``, in the same registry, tagged with its seed) and is a
thin adapter: it validates the input with a strict pydantic model, renames fields, calls
the same services and selectors as the canonical tools, and renders the answer in
the seed's shape. Claim rules, reference and cycle checks, auto-unblock and
numbering all come from ``services``; nothing here decides them again.

One module a seed: ``seed002`` and ``seed003`` (importing this package declares their
tools); ``common`` holds what both use.
"""

from __future__ import annotations

from boards.agents.dialects import seed002, seed003  # noqa: F401  (declares the seeds' tools)
from boards.agents.dialects.common import DIALECTS, SEED002, SEED003, BareAnswer

__all__ = ["DIALECTS", "SEED002", "SEED003", "BareAnswer"]

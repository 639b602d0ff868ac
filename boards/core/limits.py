"""Every limit of the product, once: what the tool inputs (``schemas``), the columns
(``models``) and the services' own checks read.

A limit that two layers check (the pydantic input and the service a person's page calls)
is read from here by both, so they cannot drift. Changing a value that a model's
``max_length`` reads needs a migration.
"""

from __future__ import annotations

import re
from array import array
from decimal import Decimal
from itertools import accumulate

from django.conf import settings

# -- text --------------------------------------------------------------------------------

# A task's subject and its active form: one line on a card.
SUBJECT_MAX = 200
# Description, prompt, result and notes: a long document, not a dump of a repository.
LONG_TEXT_MAX = 100_000
# An owner or a recipient as stored (agent names themselves are shorter: AGENT_NAME_MAX).
NAME_MAX = 100
# What a new agent may be called: short enough for a card's owner badge.
AGENT_NAME_MAX = 64
# A person's name as Django's user model stores it (actors, deciders, members).
PERSON_NAME_MAX = 150
# A board's slug is part of every URL; its name is a page title.
SLUG_MAX = 64
BOARD_NAME_MAX = 200
# An event's kind (``states.EventKind``): a short name.
EVENT_KIND_MAX = 32
# Metadata: a flat object of small values, not a second description.
METADATA_KEYS_MAX = 100
METADATA_KEY_MAX = 100
METADATA_VALUE_MAX = 10_000
# A label is a word or two; a task carries a few.
LABEL_MAX = 64
LABELS_MAX = 10
# A batch's ref for a task it creates (and a seed's ref), e.g. "db".
REF_MAX = 64
# A person's message to an agent, and the reason an agent gives for an approval request.
MESSAGE_MAX = 10_000
APPROVAL_REASON_MAX = 2_000
# A person's note on a decision (an approval, a denial, a held tool call, a retry).
NOTE_MAX = 2_000
# A search of the tasks' text: a few words.
QUERY_MAX = 200
# The model an agent names in a usage report.
MODEL_MAX = 100
# A coding client's session keeps its person's latest prompt (its goal) this long: enough
# to judge a held call by, not the whole conversation.
SESSION_GOAL_MAX = 2_000
# Event rows keep long texts shortened: the task itself has them in full.
EVENT_VALUE_MAX = 500

# -- lists and pages -----------------------------------------------------------------------

# Task ids in one field (blockedBy, blocks…).
IDS_MAX = 100
# Operations in one TaskBatch.
BATCH_OPS_MAX = 500
# TaskList: tasks per page by default, and at most.
LIST_PAGE = 100
LIST_MAX = 500
# The event log (the activity feed and GET /events): events per page by default, at most.
ACTIVITY_PAGE = 50
ACTIVITY_MAX = 500

# -- usage and money -----------------------------------------------------------------------

# What one usage report may say, and what a task and a board may add up to. The sums stay
# far inside their columns (DecimalField(16, 6): under ten billion dollars; big integers),
# so no agent can store a number the database cannot read back.
TOKENS_MAX = 10**9
COST_MAX = Decimal("10000")
TASK_TOKENS_MAX = 10**13
TASK_COST_MAX = Decimal("1000000")
BOARD_COST_MAX = Decimal("1000000000")
# A board's budget: as much as a board may spend.
BUDGET_MAX = BOARD_COST_MAX

# -- time ------------------------------------------------------------------------------

# A claim's lease (TaskClaim's leaseSeconds and the board's setting): shorter than five
# seconds would lapse between two calls of a working agent; longer than a day is no lease.
LEASE_MIN, LEASE_MAX = 5, 86_400
# TaskWatch: the default is under the 60 s request timeout of common MCP clients (the
# TypeScript SDK's), so a default watch answers timedOut: true before the client gives up.
WATCH_DEFAULT_SECONDS = 45
WATCH_MAX_SECONDS = 300

# -- gate rules ----------------------------------------------------------------------------

# A board's gate rules: each is matched against every tool call of its agents.
GATE_RULES_MAX = 100
# All of a board's rules together get this much CPU time to match one call; past it, the
# call is asked about (a slow rule cannot slow every call, nor let one by). CPU time, not
# the wall clock: a loaded server must not hold ordinary calls for a person.
GATE_MATCH_BUDGET_SECONDS = 0.1
# A pattern's size once its repeats are counted (``(a{100}){100}`` is 10,000): compiling
# a larger one costs the server seconds and gigabytes.
GATE_PATTERN_SIZE_MAX = 10_000

# -- requests --------------------------------------------------------------------------
# Read by every door, and enforced before any door by the server's edge (``kanban.edge``).

# Room for the MCP JSON-RPC envelope around a tool call's arguments (boards.agents.mcp): the
# tool API, the hook door and the MCP endpoint each check their exact limit once the body
# is read; the edge refuses, unread, what no door would take.
ENVELOPE_BYTES = 16 * 1024


def body_limit() -> int:
    """The largest request body the server reads at all (any door's cap, and room for the
    MCP envelope)."""
    largest = max(int(settings.KANBAN_MAX_BODY_BYTES), int(settings.KANBAN_HOOK_MAX_BODY_BYTES))
    return largest + ENVELOPE_BYTES


# The longest request target (path and query) a request may name. Twisted reads a
# request line of up to 16 KiB and hangs up without a word on a longer one; past this
# the edge answers 414. Every URL of the product is far shorter.
REQUEST_TARGET_MAX = 8 * 1024

# How deep a JSON body may nest. A tool call needs five or six levels (an MCP envelope
# around a batch's ops and their lists); parsers recurse per level, and a body of
# 50,000 brackets takes Python's json down with a RecursionError, so depth is counted
# before any parser sees the body. (NaN, Infinity and NUL are refused once it is parsed:
# ``tools.unstorable``.)
JSON_DEPTH_MAX = 64
# A JSON string, escapes included: what lies between its quotes is no structure.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = b"[]{}"
_OTHER_BYTES = bytes(set(range(256)) - set(_BRACKETS))
# An opening bracket counts +1, a closing one -1 (as signed bytes).
_DEPTH_STEPS = bytes.maketrans(_BRACKETS, bytes([1, 255, 1, 255]))


def json_problem(raw: bytes) -> str | None:
    """Why a request body is refused before it is parsed as JSON (nested deeper than
    ``JSON_DEPTH_MAX`` levels), or None. Every door that parses JSON asks this first.

    Cheap: a body with few brackets is passed by two counts; otherwise its strings are
    cut out and the brackets summed, at C speed (about 1 ms for a 500-op batch).
    """
    opening = raw.count(b"[") + raw.count(b"{")
    if opening <= JSON_DEPTH_MAX:
        return None
    outside = _JSON_STRING.sub(b'""', raw)
    steps = array("b", outside.translate(_DEPTH_STEPS, _OTHER_BYTES))
    if max(accumulate(steps), default=0) > JSON_DEPTH_MAX:
        return f"nested deeper than {JSON_DEPTH_MAX} levels"
    return None

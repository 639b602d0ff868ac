"""Every limit of the product, once: what the tool inputs (``schemas``), the columns
(``models``) and the services' own checks read.

A limit that two layers check (the pydantic input and the service a person's page calls)
is read from here by both, so they cannot drift. Changing a value that a model's
``max_length`` reads needs a migration.
"""

from __future__ import annotations

from decimal import Decimal

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

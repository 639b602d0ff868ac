"""``agent-kanban runner``: the program a person starts on a machine where code lives
(SPEC §16). It starts a coding CLI on a card in a git worktree of its own, carries a
person's reply into that session, and brings the diff back for review and merge.

Like the forwarder (``boards.clients.forwarder``), it runs on people's machines, not in
the board: it imports no Django and no other part of ``boards`` (the contract in
pyproject.toml and ``tests/runner/test_place.py`` hold it). It talks to the board only
outbound, with a runner token that can claim, renew and report its own runs and decide
nothing; the board's side of a run is ``boards.runs``.

Where its code goes, one module a concern:

- ``program.py``: the command line (``--url``, ``--repo``, ``--name``, ``--max-sessions``,
  ``--clients``), the one connection to the board (commands within a second, reconnects
  with backoff, commands sent while away delivered once or refused as stale), the runs
  it holds and their leases;
- ``worktrees.py``: a worktree and branch ``kanban/<slug>-<n>`` per card under the
  runner's data directory, the diff, the merge (commit, then fast-forward or merge into
  the base; never a rebase);
- ``processes.py``: each session's process tree, interrupted first, then ended whole;
- ``clients/``: one adapter a client, as the hook adapters are one module a client
  (``claude_code.py``: one long-lived ``claude -p --input-format stream-json``;
  ``codex.py``: ``codex app-server``; then Gemini, Qwen, Copilot, opencode), each behind
  the one small interface of ``clients/base.py``: start, send, answer, interrupt, close,
  kill, and the state events it reports (started, message, tool call, waiting, ended).
"""

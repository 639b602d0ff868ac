"""What a server process runs beside its requests, started once by ``kanban.asgi``.

- the sweeper: a thread that, about once a second, reclaims lapsed leases
  (``services.leases_sweep``), ends held tool calls whose client went away, marks agents
  that went quiet and runners that stopped polling, and wakes webhook deliveries whose
  wake-up was lost or whose worker died (``delivery.kick``);
- webhook workers (``delivery.start_workers``), ``KANBAN_WORKER_THREADS`` threads.

``KANBAN_SWEEPER`` and ``KANBAN_WORKER`` (settings) turn either off: a scale-out
deployment may sweep in fewer processes, and run ``manage.py db_worker --queue-name
webhooks`` instead of workers in each server. Neither starts in a process named by
``KANBAN_NO_SWEEPER_PID`` (the test runner's own process, whose tests sweep and deliver
when they mean to, while the servers it starts keep theirs).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections

from boards.clients import calls
from boards.core import services
from boards.needs import decisions
from boards.runs import services as runs
from boards.webhooks import delivery

logger = logging.getLogger(__name__)

SWEEP_INTERVAL_SECONDS = 1.0
PRUNE_EVERY = 600  # sweeps between prunings of finished webhook sender runs
AGENT_SWEEP_EVERY = 3  # sweeps between looks at which agents went quiet

_started = threading.Event()


def start() -> None:
    """Start this process's sweeper and webhook workers, once, as the settings say."""
    if _started.is_set() or os.environ.get("KANBAN_NO_SWEEPER_PID") == str(os.getpid()):
        return
    _started.set()
    if settings.KANBAN_SWEEPER:
        threading.Thread(
            target=sweep_forever, args=(SWEEP_INTERVAL_SECONDS,), name="sweeper", daemon=True
        ).start()
    if settings.KANBAN_WORKER:
        delivery.start_workers(max(0, settings.KANBAN_WORKER_THREADS))


def sweep_forever(interval: float) -> None:
    rounds = 0
    while True:
        _guarded("lease sweep", services.leases_sweep)
        # Held tool calls whose client went away end with their rule's fallback.
        _guarded("tool call expiry", calls.tool_calls_expire)
        if rounds % AGENT_SWEEP_EVERY == 0:
            # Agents turning silent or gone show within seconds, with no other write.
            _guarded("agent states", services.agents_sweep)
            # Runners that stopped polling show offline on open rosters.
            _guarded("runner presence", runs.runners_sweep)
        # Failures and assignments whose grace ended come to need a person.
        _guarded("needs sweep", decisions.needs_sweep)
        # Webhook deliveries whose wake-up was lost or whose worker died go out again.
        _guarded("webhook kick", delivery.kick)
        rounds += 1
        if rounds % PRUNE_EVERY == 0:
            _guarded("webhook prune", delivery.prune)
        close_old_connections()
        threading.Event().wait(interval)


def _guarded(name: str, step: Callable[[], object]) -> None:
    """Run one of the sweeper's steps; a failure is logged and the others still run."""
    try:
        step()
    except Exception:  # a database hiccup must not end the sweeper
        logger.exception("%s failed", name)

"""The task library's database worker run in threads of the test process, as a server
process runs its workers (``boards.boot``): for tests of what the background queue does
(webhook deliveries, Web Push)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections
from django_tasks_db.management.commands.db_worker import Worker

from boards.webhooks.delivery import QUEUE


@contextmanager
def worker_threads(count: int = 1) -> Iterator[None]:
    """``count`` workers polling the background queue, each in its own thread; stopped on
    the way out (a worker still running 30 s later fails the test)."""
    workers = [
        Worker(
            queue_names=[QUEUE],
            interval=0.05,
            batch=False,
            backend_name="default",
            startup_delay=False,
            max_tasks=None,
            worker_id=f"test-thread-{n}",
            excluded_queue_names=[],
        )
        for n in range(count)
    ]

    def work(worker: Worker) -> None:
        try:
            worker.run()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(worker,), daemon=True) for worker in workers]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for worker in workers:
            worker.running = False
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads), "a worker thread is stuck"

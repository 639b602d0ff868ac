"""The SQLite file under a server process whose requests each run in a thread of their own."""

from __future__ import annotations

import sqlite3
import threading
from urllib.request import pathname2url

from django.db import connections

_held: sqlite3.Connection | None = None
_lock = threading.Lock()


def hold_sqlite_open() -> bool:
    """Keep one idle connection to the SQLite file open for the life of the process.

    When the last connection to a WAL database closes, SQLite checkpoints the log into
    the file and deletes it. Under ASGI every request runs in a thread of its own and
    closes its connection when it ends, so without this most requests pay for that
    checkpoint: about 1.5 ms, more than a tool call's queries. Held open (no transaction,
    so no lock), this connection makes each request's close cheap; the log is still
    checkpointed every 1,000 pages, as SQLite does. True when a connection is held.
    """
    global _held
    database = connections["default"].settings_dict
    name = str(database["NAME"])
    if database["ENGINE"] != "django.db.backends.sqlite3" or name in ("", ":memory:"):
        return False
    with _lock:
        if _held is None:
            try:
                # mode=rw: never creates the file (it is migrate's to create).
                uri = f"file:{pathname2url(name)}?mode=rw"
                _held = sqlite3.connect(uri, uri=True, check_same_thread=False)
                _held.execute("PRAGMA schema_version").fetchall()  # opens the file, then idles
            except sqlite3.Error:
                _held = None
                return False
    return True

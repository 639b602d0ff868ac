"""What the hostile-conditions tests (``test_hostile_*.py``) share: the backend of this
pass, and a logged-in person's board socket against a live server.

Every such test is bounded: a fixed number of examples, calls and seconds, loopback only.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from devtools.liveserver import Cluster, postgres_admin_url, session_cookie

# Each pass runs on its own database: SQLite by default, PostgreSQL when DATABASE_URL is one.
BACKENDS = ["postgresql"] if postgres_admin_url() else ["sqlite"]
PERSON = ("pat", "pw-pat-123")


# A new board's history holds one event (board_created): a page rendered now is at seq 1,
# so a socket that names it gets no catch-up.
FRESH = 1


def ws_url(base: str, slug: str, seq: int | None = None) -> str:
    query = "" if seq is None else f"?seq={seq}"
    return base.replace("http://", "ws://") + f"/ws/boards/{slug}/{query}"


async def login(cluster: Cluster, base: str) -> dict[str, str]:
    """The headers a logged-in browser tab sends with its WebSocket handshake."""
    cluster.user(*PERSON)
    cookie = await asyncio.to_thread(session_cookie, base, *PERSON)
    return {"Cookie": cookie, "Origin": base}


def card_ids(frame: str | bytes) -> set[str]:
    return set(re.findall(r'data-task-id="(\d+)"', str(frame)))


def frame_seq(frame: str | bytes) -> int | None:
    found = re.search(r'id="board-seq" data-seq="(\d+)"', str(frame))
    return int(found.group(1)) if found else None


async def frames_until(ws: Any, wanted: set[str], seconds: float) -> list[str]:
    """Frames received until every card in ``wanted`` has come; TimeoutError after ``seconds``."""
    frames: list[str] = []
    seen: set[str] = set()

    async def collect() -> None:
        while not wanted <= seen:
            frame = str(await ws.recv())
            frames.append(frame)
            seen.update(card_ids(frame))

    await asyncio.wait_for(collect(), seconds)
    return frames

"""Push latency: an agent's call sent → the card's change seen, in Chromium pages and at
WebSocket clients (against a bare ``group_send`` echo to as many sockets, the floor)."""

from __future__ import annotations

import asyncio
import re
import statistics
import time
import urllib.request
from typing import Any

from devtools.liveserver import CHROMIUM_ARGS, CHROMIUM_PATH, Agent, Cluster, session_cookie

from .common import PASSWORD, USER, board, login, percentile, rss_mb

# Records, in the page, when the expected card first stands in the expected column.
OBSERVER_JS = """
() => {
  window.__expect = null; window.__seen = {}; window.__waiters = {};
  const check = () => {
    const e = window.__expect;
    if (!e || window.__seen[e.key]) return;
    if (document.querySelector(`[data-column="${e.column}"] [data-task-id="${e.id}"]`)) {
      const at = performance.timeOrigin + performance.now();
      window.__seen[e.key] = at;
      if (window.__waiters[e.key]) window.__waiters[e.key](at);
    }
  };
  // Resolves when the card is seen, so the harness waits without polling the page.
  window.__wait = key => new Promise(resolve => {
    if (window.__seen[key]) resolve(window.__seen[key]); else window.__waiters[key] = resolve;
  });
  new MutationObserver(check).observe(document.getElementById("board"), {childList: true, subtree: true});
}
"""


def browser_push(cluster: Cluster, pages: int, changes: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    slug = f"push{pages}"
    agent = board(cluster, slug)
    samples: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
        context = browser.new_context()
        login(context, cluster)
        state = context.storage_state()
        opened = []
        for _ in range(pages):
            # One context per page: a page in the background of a shared context counts
            # as a hidden tab, and the board pauses its socket while hidden.
            page = browser.new_context(storage_state=state).new_page()
            page.goto(f"{cluster.bases[0]}/boards/{slug}/")
            # A selector, not wait_for_function: the page's CSP allows no eval.
            page.wait_for_selector('#live-status[data-state="live"]', timeout=10_000)
            page.evaluate(OBSERVER_JS)
            opened.append(page)
        steps: list[tuple[str, dict[str, Any], int, str]] = []
        number = 0
        while len(steps) < changes:
            number += 1
            steps += [
                ("TaskCreate", {"subject": f"Change {number}"}, number, "pending"),
                ("TaskClaim", {"taskId": str(number)}, number, "in_progress"),
                (
                    "TaskUpdate",
                    {"taskId": str(number), "status": "completed"},
                    number,
                    "completed",
                ),
            ]
        for index, (tool, body, task_id, column) in enumerate(steps[:changes]):
            key = f"k{index}"
            expect = {"key": key, "id": str(task_id), "column": column}
            for page in opened:
                page.evaluate("e => { window.__expect = e; }", expect)
            sent = time.time() * 1000
            status, _ = agent.call(tool, body)
            assert status == 200, (tool, status)
            for page in opened:
                samples.append(page.evaluate("key => window.__wait(key)", key) - sent)
        browser.close()
    return {
        "pages": pages,
        "changes": changes,
        "p50_ms": round(statistics.median(samples), 1),
        "p99_ms": round(percentile(samples, 99), 1),
        "max_ms": round(max(samples), 1),
    }


def socket_push(cluster: Cluster, counts: list[int], changes: int) -> list[dict[str, Any]]:
    """Agent call sent → the card's fragment received by every WebSocket client, against
    a bare group_send echo to the same number of sockets (the floor)."""
    cookie = session_cookie(cluster.bases[0], USER, PASSWORD)
    rows = []
    for count in counts:
        slug = f"ws{count}x{len(cluster.bases)}"
        agent = board(cluster, slug)
        board_urls = [
            cluster.bases[i % len(cluster.bases)].replace("http", "ws", 1) + f"/ws/boards/{slug}/"
            for i in range(count)
        ]
        echo_urls = [
            cluster.bases[i % len(cluster.bases)].replace("http", "ws", 1) + "/ws/bench-echo/"
            for i in range(count)
        ]
        before = [rss_mb(cluster, i) for i in range(len(cluster.bases))]
        push, rss = asyncio.run(_socket_run(cluster, board_urls, cookie, changes, agent=agent))
        echo, _ = asyncio.run(_socket_run(cluster, echo_urls, cookie, changes, agent=None))
        p50 = statistics.median(push)
        rows.append(
            {
                "clients": count,
                "changes": changes,
                "p50_ms": round(p50, 1),
                "p99_ms": round(percentile(push, 99), 1),
                "echo_p50_ms": round(statistics.median(echo), 1),
                "echo_p99_ms": round(percentile(echo, 99), 1),
                "x_echo": round(p50 / statistics.median(echo), 1),
                "rss_mb_idle": before,
                "rss_mb_connected": rss,
            }
        )
    return rows


async def _socket_run(
    cluster: Cluster, urls: list[str], cookie: str, changes: int, *, agent: Agent | None
) -> tuple[list[float], list[float]]:
    import websockets

    sockets = []
    for url in urls:
        origin = "http://" + url.split("://", 1)[1].split("/", 1)[0]
        sockets.append(
            await websockets.connect(
                url, additional_headers={"Cookie": cookie, "Origin": origin}, max_size=None
            )
        )
    queues: list[asyncio.Queue] = [asyncio.Queue() for _ in sockets]

    async def reader(ws: Any, queue: asyncio.Queue) -> None:
        async for frame in ws:
            await queue.put((time.perf_counter(), frame))

    readers = [asyncio.create_task(reader(ws, q)) for ws, q in zip(sockets, queues, strict=True)]
    await asyncio.sleep(0.5)  # let catch-up frames arrive, then drop them
    for queue in queues:
        while not queue.empty():
            queue.get_nowait()
    rss = [rss_mb(cluster, i) for i in range(len(cluster.bases))]
    samples: list[float] = []
    steps = [
        ("TaskCreate", lambda n: {"subject": f"Change {n}"}, "pending"),
        ("TaskClaim", lambda n: {"taskId": str(n)}, "in_progress"),
        ("TaskUpdate", lambda n: {"taskId": str(n), "status": "completed"}, "completed"),
    ]
    for index in range(changes):
        number = index // 3 + 1
        tool, body, column = steps[index % 3]
        if agent is None:
            marker = f"^echo-{index}$"
            sent = time.perf_counter()
            await asyncio.to_thread(
                urllib.request.urlopen, f"{cluster.bases[0]}/bench/echo/?n=echo-{index}"
            )
        else:
            # Matched against the frame with its white space collapsed (templates write a long
            # start tag one attribute per line).
            marker = f'hx-target="#cards-{column}"[^>]*> ?<article id="task-{number}"'
            sent = time.perf_counter()
            status, answer = await asyncio.to_thread(agent.call, tool, body(number))
            assert status == 200, answer
        for client, queue in enumerate(queues):
            while True:
                try:
                    received, frame = await asyncio.wait_for(queue.get(), 10)
                except TimeoutError:
                    raise RuntimeError(
                        f"client {client} of {len(queues)} ({urls[client]}) got no frame "
                        f"for change {index} in 10 s"
                    ) from None
                if re.search(marker, re.sub(r"\s+", " ", frame)):
                    samples.append((received - sent) * 1000)
                    break
    for task in readers:
        task.cancel()
    for ws in sockets:
        await ws.close()
    return samples, rss

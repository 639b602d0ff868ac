"""The graph page's HTML (issue 16): reached from the board, it asks for the graph.json of
its scope while its scripts load, and its layout library is vendored and CSP-safe.
(The page in a browser: tests/browser/test_graph_live.py.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

from tests.support.htmltext import flat


def test_the_board_links_to_its_graph(board, person_client):
    page = person_client.get("/boards/team/").content.decode()
    assert '<a class="button" href="/boards/team/graph/">Graph</a>' in page


@pytest.mark.parametrize(
    ("query", "json_query", "current"),
    [
        ("", "scope=open", "Open work"),
        ("?scope=all", "scope=all", "Everything"),
        ("?task=4", "task=4", None),
    ],
)
def test_the_page_preloads_the_graph_json_it_draws(
    board, person_client, query, json_query, current
):
    page = flat(person_client.get(f"/boards/team/graph/{query}").content)
    url = f"/boards/team/graph.json?{json_query}"
    assert f'<link rel="preload" as="fetch" crossorigin href="{url}">' in page
    assert f'data-json="{url}"' in page
    assert 'href="/boards/team/">Board</a>' in page
    marked = re.findall(r'aria-current="page">([^<]+)<', page)
    assert marked == ([current] if current else [])
    if not current:
        assert 'name="task" inputmode="numeric" size="6" placeholder="#" value="4"' in page


def test_a_bad_task_number_is_refused_on_the_page_too(board, person_client):
    assert person_client.get("/boards/team/graph/?task=x").status_code == 400


def test_the_vendored_layout_library_needs_no_eval():
    """The pages' CSP refuses eval and new Function: the library must not need them."""
    folder = Path(settings.BASE_DIR) / "static" / "vendor" / "dagre-3.1.3"
    source = (folder / "dagre.min.js").read_text()
    assert source.startswith('"use strict";var dagre=')  # a plain script's global
    assert '"3.1.3"' in source
    assert not re.search(r"\beval\(|new Function|Function\(", source)
    assert "Permission is hereby granted" in (folder / "LICENSE").read_text()  # MIT

"""The benchmark harness keeps working: a quick run of ``manage.py bench`` end to end."""

import json
import subprocess
import sys

import pytest

from devtools.liveserver import ROOT


@pytest.mark.slow
@pytest.mark.browser
def test_quick_bench_run_measures_every_section(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "manage.py", "bench", "--quick", "--skip", "pg", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(out.read_text())["sqlite"]
    assert set(figures["tool_calls"]) >= {"empty JSON view", "TaskCreate", "TaskList (1000 tasks)"}
    assert figures["browser_push"][0]["p50_ms"] > 0
    assert [row["clients"] for row in figures["socket_push"]] == [1, 5]
    assert figures["render"][0]["queries"] > 0
    assert figures["race"]["exactly_once"] is True
    assert figures["race"]["server_errors"] == 0
    assert "WebSocket push" in result.stdout


@pytest.mark.slow
@pytest.mark.browser
def test_bench_graph_times_the_graph_page(tmp_path):
    out = tmp_path / "bench.json"
    command = ["bench", "--graph", "--graph-tasks", "60", "--out", str(out)]
    result = subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    graph = json.loads(out.read_text())["graph"]
    assert graph["tasks"] == 60 and graph["edges"] == 87
    assert len(graph["rendered_ms"]) == 3 and graph["rendered_ms_p50"] > 0
    assert "graph: 60 open tasks, 87 edges, layout+render " in result.stdout

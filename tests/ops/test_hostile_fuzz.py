"""Hostile conditions (SPEC §3.1, §4): a fuzzer driven by the served OpenAPI document,
against a real daphne process, and the regression test for its first find.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.generation.meta import TestPhase

from devtools.liveserver import call
from tests.support.hostile import BACKENDS

pytestmark = pytest.mark.slow


# --- Schemathesis against the served OpenAPI document -------------------------------------

# Per operation: the document's own examples (where it has any), then generated valid and
# invalid inputs; then (Fuzz.hostile) an answered input again with each number it reads
# replaced by each of HOSTILE, the values generation almost never reaches.
FUZZ_PLAN = [
    (schemathesis.GenerationMode.POSITIVE, TestPhase.EXAMPLES, 5),
    (schemathesis.GenerationMode.POSITIVE, TestPhase.FUZZING, 25),
    (schemathesis.GenerationMode.NEGATIVE, TestPhase.FUZZING, 25),
]
FUZZ_CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
]
WATCH_SECONDS = 0.2  # a generated TaskWatch may ask for 300 s; the fuzzer waits this long at most

# Text no door may read as a number nor crash on (issue #23): digits of other scripts, which
# str.isdigit() accepts and int() refuses ("²") or reads as another number ("٣" as 3), and
# what int(), Decimal() and date.fromisoformat() are lenient about or overflow on.
FOREIGN_DIGITS = ["²", "٣", "１０", "3²"]
HOSTILE = [
    *FOREIGN_DIGITS,
    *("-1", "0", "9" * 20, "9" * 5000, "NaN", "Infinity", "", "\x00", "x" * 10_000),
    *(" 3", "3\n", "#3", "+3", "1_0", "3.0", "1e3", "0001-01-01", "9999-12-31"),
]
# Fields of a tool's input that name a task or count something; each is spoiled in turn.
NUMBER_FIELDS = {"taskId", "parentId", "cursor", "limit", "leaseSeconds", "timeoutSeconds"}
ID_LISTS = {"blockedBy", "blocks", "addBlockedBy", "removeBlockedBy", "addBlocks"}


def _tame(case: Any, real_id: str | None) -> None:
    """Aim a generated case at a real task and keep it inside the test's time budget."""
    if not isinstance(case.body, dict):
        return
    if real_id is not None and isinstance(case.body.get("taskId"), str):
        # The document does not say that ids are digits (TaskId's pattern does not reach the
        # JSON schema), so generated ids are nearly never real ones: use one of the board's.
        case.body["taskId"] = real_id
    if case.operation.label.endswith("/TaskWatch"):
        seconds = case.body.get("timeoutSeconds", 60)
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
            case.body["timeoutSeconds"] = min(seconds, WATCH_SECONDS)
        elif "timeoutSeconds" not in case.body:
            case.body["timeoutSeconds"] = WATCH_SECONDS


# The fields of a batch's operations that name tasks, by kind of operation.
OP_FIELDS = {
    "create": ("parentId", "blockedBy", "blocks"),
    "update": ("taskId", "parentId", "addBlockedBy", "removeBlockedBy", "addBlocks"),
    "delete": ("taskId",),
}


def _spoiled(body: Any, value: str) -> Iterator[Any]:
    """``body`` once per task-naming or counting field in it, that field set to ``value``
    (a list of ids to ``[value]``); in a batch's ops too, where the fields an op left out
    are added."""
    if isinstance(body, dict):
        names = {*body, *OP_FIELDS.get(body.get("op"), ())}
        for key in sorted(names & (NUMBER_FIELDS | ID_LISTS)):
            yield {**body, key: [value] if key in ID_LISTS else value}
        for key, item in body.items():
            for inner in _spoiled(item, value):
                yield {**body, key: inner}
    elif isinstance(body, list):
        for index, item in enumerate(body):
            for inner in _spoiled(item, value):
                yield [*body[:index], inner, *body[index + 1 :]]


class Fuzz:
    """Runs generated cases of one operation against the server, collecting (never raising)
    every failed check, so one run reports everything it found."""

    def __init__(
        self, *, base: str, auth: dict[str, str], admin: dict[str, str], document: dict
    ) -> None:
        self.base, self.tool_auth, self.admin, self.document = base, auth, admin, document
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.failures: list[str] = []
        # Per operation, inputs the server answered 2xx: the hostile pass spoils them.
        self.answered: dict[str, list[Any]] = {}

    def auth(self, operation: Any) -> dict[str, str]:
        """The event log is read with an admin-scoped token; everything else as the agent."""
        return self.admin if operation.path.endswith("/events") else self.tool_auth

    def run(self, operation: Any, mode: Any, phase: TestPhase, examples: int) -> None:
        strategy = operation.as_strategy(
            generation_mode=mode,
            phase=phase,
            path_parameters={"slug": "fuzz"},
            headers=self.auth(operation),
        )
        # Half of the valid cases name one of the board's tasks.
        real_ids = st.none()
        if mode is schemathesis.GenerationMode.POSITIVE:
            real_ids |= st.sampled_from(["1", "2", "3", "4", "5", "6"])

        @given(case=strategy, real_id=real_ids)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case: Any, real_id: str | None) -> None:
            self.check(case, real_id, f"{mode.value}/{phase.value}")

        exercise()

    def check(self, case: Any, real_id: str | None, kind: str) -> Any:
        """Send ``case``; its response, or None when the request itself failed."""
        _tame(case, real_id)
        auth = self.auth(case.operation)
        try:
            response = case.call(base_url=self.base, headers=auth, timeout=30)
        except Exception as exc:  # a hung or dropped request is a finding too
            self.failures.append(f"[{kind}] {case.operation.label}: {exc!r}\n{case.body!r}"[:2000])
            return None
        label = case.operation.label
        self.statuses[(label, response.status_code)] += 1
        if 200 <= response.status_code < 300 and len(self.answered.setdefault(label, [])) < 2:
            self.answered[label].append(case.query if case.operation.method == "get" else case.body)
        try:
            case.validate_response(response, checks=FUZZ_CHECKS, headers=auth)
        except BaseException as exc:  # schemathesis reports failures as a FailureGroup
            if not isinstance(exc, Exception | BaseExceptionGroup):
                raise
            self.failures.append(f"[{kind}] {exc}"[:2000])
        return response

    def hostile(self, operation: Any, agent: str) -> None:
        """Every hostile value in every number the operation reads, in inputs it answered:
        never a 5xx, digits of another script a 400 wherever a number is read, and a refused
        call writes nothing (no event by ``agent`` in the log after it)."""
        for case, number in self._spoiled_cases(operation):
            seq = self.last_seq()
            response = self.check(case, None, "hostile")
            if response is None:
                continue
            sent = case.query if operation.method == "get" else case.body
            foreign = any(d in json.dumps(sent, ensure_ascii=False) for d in FOREIGN_DIGITS)
            if number and foreign and response.status_code != 400:
                self.failures.append(
                    f"[hostile] {operation.label} {sent!r}: {response.status_code}"
                )
            if response.status_code >= 400:
                written = [e for e in self.events_after(seq) if e["actor"] == agent]
                if written:
                    self.failures.append(f"[hostile] {operation.label} {sent!r}: wrote {written}")

    def _spoiled_cases(self, operation: Any) -> Iterator[tuple[Any, bool]]:
        """Cases with one value spoiled each, and whether that value is read as a number."""
        answered = self.answered.get(operation.label, [])
        if operation.method == "get":
            # Every parameter gets every value; those of numbers and days must refuse digits
            # of another script (a name, say an actor's, may hold any).
            query = dict(answered[0] or {}) if answered else {}
            for parameter in operation.query:
                schema = parameter.definition["schema"]
                number = schema.get("type") == "integer" or schema.get("format") == "date"
                for value in HOSTILE:
                    spoiled = {**query, parameter.name: value}
                    yield operation.Case(query=spoiled, path_parameters={"slug": "fuzz"}), number
            return
        body = answered[0] if answered else None
        if not isinstance(body, dict):
            return
        # The fields it has, and those the tool declares that it left out.
        missing = [name for name in self.declared(operation) if name not in body]
        for value in HOSTILE:
            added = ({**body, name: [value] if name in ID_LISTS else value} for name in missing)
            for spoiled in [*_spoiled(body, value), *added]:
                case = operation.Case(
                    body=spoiled, path_parameters={"slug": "fuzz"}, media_type="application/json"
                )
                yield case, True

    def declared(self, operation: Any) -> list[str]:
        """The task-naming and counting fields of the tool's input, as its document says."""
        body = operation.definition.raw["requestBody"]["content"]["application/json"]
        name = body["schema"]["$ref"].rsplit("/", 1)[-1]
        fields = self.document["components"]["schemas"][name].get("properties", {})
        return [field for field in fields if field in NUMBER_FIELDS or field in ID_LISTS]

    def events_after(self, seq: int) -> list[dict[str, Any]]:
        request = urllib.request.Request(
            f"{self.base}/api/boards/fuzz/events?after={seq}&limit=500", headers=self.admin
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["events"]

    def last_seq(self) -> int:
        request = urllib.request.Request(
            f"{self.base}/api/boards/fuzz/events?limit=1&after={2**62}", headers=self.admin
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(json.loads(response.read())["lastSeq"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_fuzzing_the_served_openapi_document_finds_no_server_error_and_no_undocumented_answer(
    cluster_factory, backend
):
    cluster = cluster_factory(backend)
    base = cluster.start()
    cluster.board("fuzz")
    token = cluster.token("fuzz", "fuzzer")
    # Tasks in every interesting state, so ids the fuzzer sends ("3") hit real tasks.
    ops = [
        {"op": "create", "ref": "a", "subject": "Plain"},
        {"op": "create", "ref": "b", "subject": "Blocked", "blockedBy": ["a"]},
        {"op": "create", "ref": "c", "subject": "Needs approval", "requiresApproval": True},
        {"op": "create", "ref": "d", "subject": "Child", "parentId": "a"},
        {"op": "create", "ref": "e", "subject": "Done"},
        {"op": "update", "taskId": "e", "status": "completed", "result": "ok"},
    ]
    assert call(base, "fuzz", token, "TaskBatch", {"ops": ops})[0] == 200

    admin = cluster.manage("issuetoken", "fuzz", "auditor", "--admin")

    schema = schemathesis.openapi.from_url(f"{base}/api/openapi.json", timeout=10)
    fuzz = Fuzz(
        base=base,
        auth={"Authorization": f"Bearer {token}"},
        admin={"Authorization": f"Bearer {admin}"},
        document=schema.raw_schema,
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 14  # eleven tools, the tool list, the event log and the metrics
    for operation in operations:
        for mode, phase, examples in FUZZ_PLAN:
            fuzz.run(operation, mode, phase, examples)
    for operation in operations:
        fuzz.hostile(operation, "fuzzer")
    failures, statuses = fuzz.failures, fuzz.statuses

    assert not failures, f"{len(failures)} failures:\n\n" + "\n\n".join(failures[:10])
    assert not [key for key in statuses if key[1] >= 500], statuses
    # The fuzz reached the tools themselves, not only their input validation.
    answered = {label for (label, status) in statuses if 200 <= status < 300}
    assert len(answered) >= 10, statuses
    # The hostile pass had answered inputs to spoil for the tools that read numbers.
    for name in ("TaskGet", "TaskUpdate", "TaskBatch", "TaskList", "events", "metrics"):
        assert any(label.endswith(name) for label in fuzz.answered), fuzz.answered
    # Nothing failed behind an answer either (e.g. a broadcast that was logged, not raised).
    assert "Traceback" not in cluster.log(base)
    # And the server is still healthy.
    assert call(base, "fuzz", token, "TaskList", {})[0] == 200


# --- Found by the fuzzer; regression tests for its fixes -------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_nul_characters_in_text_are_refused_with_400_and_change_nothing(cluster_factory, backend):
    """PostgreSQL cannot store U+0000: the fuzzer's first find was a 500 on such text."""
    cluster = cluster_factory(backend)
    base = cluster.start()
    cluster.board("nul")
    token = cluster.token("nul", "alice")
    assert call(base, "nul", token, "TaskCreate", {"subject": "ok"})[0] == 200
    bodies = [
        ("TaskCreate", {"subject": "a\x00b"}),
        ("TaskCreate", {"subject": "ok", "metadata": {"k\x00": "v"}}),
        ("TaskUpdate", {"taskId": "1", "notes": "\x00"}),
        ("TaskRequestApproval", {"taskId": "1", "reason": "why\x00"}),
        (
            "TaskBatch",
            {"ops": [{"op": "create", "subject": "fine"}, {"op": "create", "subject": "\x00"}]},
        ),
        ("tasks", {"action": "insert", "label": "seed 003\x00"}),
    ]
    answers = [call(base, "nul", token, tool, body) for tool, body in bodies]
    assert [status for status, _ in answers] == [400] * len(bodies), answers
    assert all(set(body) == {"error"} for _, body in answers), answers
    _, listed = call(base, "nul", token, "TaskGet", {"taskId": "1"})
    assert (listed["task"]["version"], listed["task"]["notes"]) == (1, "")
    assert call(base, "nul", token, "TaskList", {})[1]["total"] == 1

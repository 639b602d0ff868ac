"""Input no door stores as given: metadata keys that shadow template lookups render as
text, non-finite numbers and out-of-range ids are a clear 4xx, a batch is bounded in its
dependencies as well as its operations."""

from __future__ import annotations

import pytest

from boards.models import Task
from tests.support.factories import make_task


def test_metadata_keys_that_shadow_template_lookups_render(person_client, alice, board):
    alice.create("Tricky", metadata={"items": "", "keys": "k", "values": 3, "zeta": True})
    response = person_client.get(f"/boards/{board.slug}/tasks/1/")
    assert response.status_code == 200
    html = response.content.decode()
    for key in ("items", "keys", "values", "zeta"):
        assert f"<dt>{key}</dt>" in html


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_a_clear_400(alice, board, literal):
    raw = b'{"subject": "x", "metadata": {"a": ' + literal.encode() + b"}}"
    reply = alice.call("TaskCreate", raw=raw)
    assert reply.status == 400
    assert "finite" in reply.error["message"]
    assert not Task.objects.filter(board=board).exists()


def test_out_of_range_ids_in_urls_are_404(person_client, board):
    huge = "99999999999999999999999"
    assert person_client.get(f"/boards/{board.slug}/tasks/{huge}/").status_code == 404
    assert person_client.post(f"/boards/{board.slug}/tasks/{huge}/delete/").status_code == 404
    assert person_client.post(f"/boards/{board.slug}/tokens/{huge}/revoke/").status_code == 404


def test_a_batch_is_bounded_in_dependencies_as_well_as_operations(alice, board):
    for n in range(1, 101):
        make_task(board, f"T{n}")
    ops = [
        {"op": "create", "subject": f"C{i}", "blockedBy": [str(n) for n in range(1, 101)]}
        for i in range(21)
    ]
    reply = alice.call("TaskBatch", {"ops": ops})
    assert reply.status == 400
    assert "2000" in reply.error["message"].replace(",", "")
    assert Task.objects.filter(board=board).count() == 100

"""The Needs-you reasons are one table (``boards.core.reasons.REASONS``): every reason has
its row, and a reason without one fails loudly instead of borrowing another's actions."""

import pytest

from boards.core.activity import needs_sentence
from boards.core.reasons import REASONS, question, reason_row
from boards.core.states import Reason


def test_every_reason_has_its_row():
    assert set(REASONS) == set(Reason.values)


def test_a_reason_without_a_row_fails_loudly():
    with pytest.raises(LookupError, match="no row in REASONS"):
        reason_row("lost_in_space")
    with pytest.raises(LookupError):
        needs_sentence("lost_in_space")


def test_a_failure_with_its_attempts_used_up_asks_another_question():
    assert question(Reason.FAILED, failures=1, max_attempts=3).startswith("failed, and work")
    assert question(Reason.FAILED, failures=3, max_attempts=3) == (
        "failed or timed out 3 times (the board allows 3); retry it, reassign it or cancel it"
    )


def test_every_action_names_a_capability_a_role_can_hold():
    from boards.core.permissions import ACTIONS

    for row in REASONS.values():
        for act in ([row.recommended] if row.recommended else []) + list(row.actions):
            assert act.needs in ACTIONS or act.needs == "view", (act, sorted(ACTIONS))

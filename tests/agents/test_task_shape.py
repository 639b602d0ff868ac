"""The task's public shape is declared once: the answer model (``answers.Task``) lists
exactly the keys the selectors build (``present.task_to_dict``), so the two cannot
drift with every test green (answers allow extra keys for clients, not for us)."""

import pytest

from boards.agents import answers
from boards.core import selectors
from tests.support.factories import make_task


@pytest.mark.django_db
def test_the_task_dict_has_exactly_the_answer_models_fields(board):
    task = make_task(board, "Shape")
    view = selectors.task_view(board, task.number)
    built = selectors.task_to_dict(view, with_children=True)
    declared = set(answers.Task.model_fields)
    assert set(built) - declared == set(), "keys built but not declared in answers.Task"
    required = {name for name, f in answers.Task.model_fields.items() if f.is_required()}
    assert required - set(built) == set(), "required fields the selector never builds"
    answers.Task.model_validate(built)


@pytest.mark.django_db
def test_a_summary_has_only_fields_the_summary_model_declares(board):
    from boards.core import services

    blocker = make_task(board, "Blocker")
    task = make_task(board, "Summary")
    services.task_update(
        board=board,
        actor="lead",
        task_id=task.number,
        add_blocked_by=[blocker.number],
        priority="urgent",
        labels=["x"],
        active_form="Summing up",
    )
    services.task_update(board=board, actor="lead", task_id=blocker.number, status="failed")
    summary = selectors.task_summary(selectors.task_view(board, task.number))
    declared = set(answers.TaskSummary.model_fields)
    assert {"priority", "labels", "blockedBy"} <= set(summary)
    assert set(summary) - declared == set()
    answers.TaskSummary.model_validate(summary)

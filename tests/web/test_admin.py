"""The admin shows the store read-only; its actions write through the services."""

import pytest

from boards.models import Event, Task
from tests.support.factories import make_task


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", password="pw-root-123")
    client.force_login(user)
    return client


def test_admin_lists_tasks_but_cannot_edit_or_add_them(admin_client, board):
    make_task(board, "Visible")
    assert b"Visible" in admin_client.get("/admin/boards/task/").content
    assert admin_client.get("/admin/boards/task/add/").status_code == 403
    task = Task.objects.get()
    page = admin_client.get(f"/admin/boards/task/{task.pk}/change/")
    assert page.status_code == 200
    assert b'name="subject"' not in page.content  # shown, not editable


def test_admin_action_completes_through_the_service(admin_client, board):
    make_task(board, "Blocker")
    make_task(board, "Dependent", blocked_by=["1"])
    blocker = Task.objects.get(number=1)
    response = admin_client.post(
        "/admin/boards/task/", {"action": "complete", "_selected_action": [blocker.pk]}
    )
    assert response.status_code == 302
    assert Task.objects.get(number=1).status == "completed"
    kinds = list(Event.objects.filter(board=board).order_by("seq").values_list("kind", "actor"))
    assert kinds[-2:] == [("status", "root"), ("unblocked", "root")]

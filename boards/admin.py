"""Django admin: read-only views of the store; the only writes are actions that call services."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from boards.core import permissions, services
from boards.core.errors import ServiceError
from boards.models import Agent, AgentToken, Board, Event, Message, Task


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows are shown, never edited here: every write goes through boards.core.services.

    A staff member who is not a superuser sees only the rows of boards they are a
    member of, and each action asks ``boards.core.permissions`` as the board's pages do.
    """

    board_path = "board"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        rows = super().get_queryset(request)
        if request.user.is_superuser:
            return rows
        return rows.filter(**{f"{self.board_path}__memberships__user": request.user})

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


def _each(request: HttpRequest, queryset: QuerySet, action: str, run) -> None:  # type: ignore[no-untyped-def]
    done = 0
    for obj in queryset:
        try:
            permissions.check(request.user, obj.board, action)
            run(obj)
            done += 1
        except ServiceError as exc:
            messages.error(request, f"{obj}: {exc.message}")
    if done:
        messages.success(request, f"{done} done.")


@admin.register(Board)
class BoardAdmin(ReadOnlyAdmin):
    def get_queryset(self, request: HttpRequest) -> QuerySet:
        rows = admin.ModelAdmin.get_queryset(self, request)
        if request.user.is_superuser:
            return rows
        return rows.filter(memberships__user=request.user)

    list_display = ["slug", "name", "task_counter", "last_seq", "updated_at"]
    search_fields = ["slug", "name"]


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ["number", "subject", "board", "status", "owner", "approval_state", "updated_at"]
    list_filter = ["board", "status", "approval_state"]
    search_fields = ["subject", "owner"]
    actions = ["complete", "cancel"]

    def _set_status(self, request: HttpRequest, queryset: QuerySet, status: str) -> None:
        actor = request.user.get_username()
        _each(
            request,
            queryset.select_related("board"),
            "status",
            lambda task: services.task_update(
                board=task.board, actor=actor, person=True, task_id=task.number, status=status
            ),
        )

    @admin.action(description="Mark selected tasks completed")
    def complete(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_status(request, queryset, "completed")

    @admin.action(description="Cancel selected tasks")
    def cancel(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_status(request, queryset, "cancelled")


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["seq", "board", "task_number", "kind", "actor", "created_at"]
    list_filter = ["board", "kind"]


@admin.register(AgentToken)
class AgentTokenAdmin(ReadOnlyAdmin):
    list_display = ["prefix", "board", "agent", "is_team", "created_at", "revoked_at"]
    list_filter = ["board", "is_team"]
    actions = ["revoke"]

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        _each(
            request,
            queryset.select_related("board"),
            "tokens",
            lambda token: services.token_revoke(board=token.board, token_id=token.pk),
        )


@admin.register(Agent)
class AgentAdmin(ReadOnlyAdmin):
    list_display = ["name", "board", "first_seen", "last_seen"]
    list_filter = ["board"]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["recipient", "sender", "board", "task_number", "created_at", "read_at"]
    list_filter = ["board"]

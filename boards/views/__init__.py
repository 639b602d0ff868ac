"""The board for people: pages, htmx fragments and actions, all writes through services.

What a board looks like lives in ``boards.rendering``; the views choose what to render and
call one service per action. By what they show: ``board``, ``tasks``, ``admin``, ``people``, ``plan``;
``common`` holds what they share, ``forms`` what people's forms read.
"""

from __future__ import annotations

from .admin import (
    board_settings,
    connect_agent,
    gate_rules,
    token_list,
    token_revoke_post,
    webhook_list,
)
from .board import (
    board_column,
    board_detail,
    board_list,
    board_reset_post,
    inbox_page,
    message_send_post,
)
from .needs import task_decided
from .people import invite_accept, member_list
from .plan import (
    activity,
    graph_json,
    graph_page,
    metrics_page,
    notify_post,
)
from .tasks import (
    call_decide,
    task_action,
    task_detail,
)

__all__ = [
    "activity",
    "board_column",
    "board_detail",
    "board_list",
    "board_reset_post",
    "board_settings",
    "call_decide",
    "connect_agent",
    "gate_rules",
    "graph_json",
    "graph_page",
    "inbox_page",
    "invite_accept",
    "member_list",
    "message_send_post",
    "metrics_page",
    "notify_post",
    "task_action",
    "task_decided",
    "task_detail",
    "token_list",
    "token_revoke_post",
    "webhook_list",
]

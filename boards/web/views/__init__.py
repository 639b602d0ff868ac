"""The board for people: pages, htmx fragments and actions, all writes through services.

What a board looks like lives in ``boards.web.rendering``; the views choose what to render and
call one service per action. By what they show: ``board``, ``tasks``, ``admin``, ``people``, ``plan``;
``common`` holds what they share, ``forms`` what people's forms read.
"""

from __future__ import annotations

from boards.web.views.admin import (
    board_settings,
    connect_agent,
    gate_rules,
    token_list,
    token_revoke_post,
    webhook_list,
)
from boards.web.views.board import (
    board_column,
    board_detail,
    board_list,
    board_reset_post,
    inbox_page,
    message_send_post,
)
from boards.web.views.needs import task_decided
from boards.web.views.people import invite_accept, member_list
from boards.web.views.plan import activity, graph_json, graph_page, metrics_page, notify_post
from boards.web.views.push import (
    manifest,
    passkey_add,
    passkey_options,
    person_page,
    push_act,
    push_key,
    push_subscribe,
    service_worker,
    step_up_options,
    step_up_verify,
)
from boards.web.views.tasks import call_decide, task_action, task_detail

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
    "manifest",
    "member_list",
    "message_send_post",
    "metrics_page",
    "notify_post",
    "passkey_add",
    "passkey_options",
    "person_page",
    "push_act",
    "push_key",
    "push_subscribe",
    "service_worker",
    "step_up_options",
    "step_up_verify",
    "task_action",
    "task_decided",
    "task_detail",
    "token_list",
    "token_revoke_post",
    "webhook_list",
]

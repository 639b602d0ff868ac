from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path, register_converter
from django.views.generic import RedirectView

from boards import api, views
from boards.converters import NumberConverter
from kanban.security import ThrottledLoginView

# Task and token numbers fit a database integer; a longer run of digits is a plain 404.
register_converter(NumberConverter, "number")

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="board-list", permanent=False)),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The admin's own login form would bypass the throttle: it uses the same view.
    path("admin/login/", ThrottledLoginView.as_view(), name="admin-login"),
    path("admin/", admin.site.urls),
    path("invite/<str:token>/", views.invite_accept, name="invite"),
    path("boards/", views.board_list, name="board-list"),
    path("inbox/", views.inbox_page, name="inbox"),
    path("boards/<slug:slug>/", views.board_detail, name="board"),
    path("boards/<slug:slug>/reset/", views.board_reset_post, name="board-reset"),
    path("boards/<slug:slug>/tokens/", views.token_list, name="tokens"),
    path(
        "boards/<slug:slug>/tokens/<number:token_id>/revoke/",
        views.token_revoke_post,
        name="token-revoke",
    ),
    path("boards/<slug:slug>/members/", views.member_list, name="members"),
    path("boards/<slug:slug>/connect/", views.connect_agent, name="connect"),
    path("boards/<slug:slug>/settings/", views.board_settings, name="board-settings"),
    path("boards/<slug:slug>/columns/<str:key>/", views.board_column, name="board-column"),
    path("boards/<slug:slug>/activity/", views.activity, name="activity"),
    path("boards/<slug:slug>/graph/", views.graph_page, name="graph"),
    path("boards/<slug:slug>/metrics/", views.metrics_page, name="metrics"),
    path("boards/<slug:slug>/graph.json", views.graph_json, name="graph-json"),
    path("boards/<slug:slug>/webhooks/", views.webhook_list, name="webhooks"),
    path("boards/<slug:slug>/notify/", views.notify_post, name="notify"),
    path("boards/<slug:slug>/messages/", views.message_send_post, name="message-send"),
    path("boards/<slug:slug>/tasks/<number:number>/", views.task_detail, name="task"),
    path(
        "boards/<slug:slug>/tasks/<number:number>/decided/",
        views.task_decided,
        name="task-decided",
    ),
    path(
        "boards/<slug:slug>/calls/<number:call_id>/<str:action>/",
        views.call_decide,
        name="call-decide",
    ),
    path("boards/<slug:slug>/gates/", views.gate_rules, name="gate-rules"),
    path(
        "boards/<slug:slug>/tasks/<number:number>/<str:action>/",
        views.task_action,
        name="task-action",
    ),
    path("healthz", api.healthz, name="healthz"),
    # OAuth-aware MCP clients probe these: JSON that says how this server authenticates.
    path(".well-known/oauth-protected-resource", api.oauth_protected_resource),
    path(".well-known/oauth-protected-resource/<path:resource>", api.oauth_protected_resource),
    path(".well-known/oauth-authorization-server", api.no_oauth),
    path(".well-known/oauth-authorization-server/<path:rest>", api.no_oauth),
    path(".well-known/openid-configuration", api.no_oauth),
    path(".well-known/openid-configuration/<path:rest>", api.no_oauth),
    path("register", api.no_oauth),
    path("api/openapi.json", api.openapi, name="openapi"),
    path("api/inbox", api.inbox, name="inbox-api"),
    path("api/boards/<slug:slug>/events", api.event_list, name="event-list"),
    path("api/boards/<slug:slug>/metrics", api.board_metrics, name="metrics-api"),
    path("api/boards/<slug:slug>/agents", api.agent_list, name="agent-list"),
    path("api/boards/<slug:slug>/tools", api.tool_list, name="tool-list"),
    path("api/boards/<slug:slug>/tools/<str:tool>", api.tool_call, name="tool-call"),
    path("api/boards/<slug:slug>/hooks/claude-code", api.claude_code_hook, name="hook-claude-code"),
]

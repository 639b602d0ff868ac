from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path, register_converter
from django.views.generic import RedirectView

from boards.agents import http
from boards.clients import door
from boards.runs import http as runs
from boards.web import views
from boards.web.converters import NumberConverter
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
    path("healthz", http.healthz, name="healthz"),
    # The installable app (SPEC §14): the service worker's scope is the folder it is
    # served from, so it lives at the root.
    path("manifest.webmanifest", views.manifest, name="manifest"),
    path("sw.js", views.service_worker, name="service-worker"),
    path("me/", views.person_page, name="person"),
    path("me/passkeys/options", views.passkey_options, name="passkey-options"),
    path("me/passkeys/", views.passkey_add, name="passkey-add"),
    path("boards/<slug:slug>/step-up/options", views.step_up_options, name="step-up-options"),
    path("boards/<slug:slug>/step-up/", views.step_up_verify, name="step-up"),
    path("api/push/key", views.push_key, name="push-key"),
    path("api/push/subscriptions", views.push_subscribe, name="push-subscribe"),
    path("push/act/<str:action>/", views.push_act, name="push-act"),
    # OAuth-aware MCP clients probe these: JSON that says how this server authenticates.
    path(".well-known/oauth-protected-resource", http.oauth_protected_resource),
    path(".well-known/oauth-protected-resource/<path:resource>", http.oauth_protected_resource),
    path(".well-known/oauth-authorization-server", http.no_oauth),
    path(".well-known/oauth-authorization-server/<path:rest>", http.no_oauth),
    path(".well-known/openid-configuration", http.no_oauth),
    path(".well-known/openid-configuration/<path:rest>", http.no_oauth),
    path("register", http.no_oauth),
    path("api/openapi.json", http.openapi, name="openapi"),
    path("api/inbox", http.inbox, name="inbox-api"),
    path("api/boards/<slug:slug>/events", http.event_list, name="event-list"),
    path("api/boards/<slug:slug>/metrics", http.board_metrics, name="metrics-api"),
    path("api/boards/<slug:slug>/agents", http.agent_list, name="agent-list"),
    path("api/boards/<slug:slug>/tools", http.tool_list, name="tool-list"),
    path("api/boards/<slug:slug>/tools/<str:tool>", http.tool_call, name="tool-call"),
    path("api/boards/<slug:slug>/hooks/<str:client>", door.client_hook, name="hook"),
    # Runners (SPEC §16): the program people start where code lives, outbound only.
    path("api/boards/<slug:slug>/runners", runs.runner_list, name="runner-list"),
    path("api/boards/<slug:slug>/runners/hello", runs.runner_hello, name="runner-hello"),
    path("api/boards/<slug:slug>/runners/poll", runs.runner_poll, name="runner-poll"),
    path("api/boards/<slug:slug>/runners/<str:name>/ping", runs.runner_ping, name="runner-ping"),
    path(
        "api/boards/<slug:slug>/runners/<str:name>/commands/<number:command_id>",
        runs.runner_command,
        name="runner-command",
    ),
]

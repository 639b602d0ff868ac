"""THE write path of Agent Kanban.

Every change from every door (tool API, MCP, board views, admin, commands) goes
through a function re-exported here. Each runs in one unit of work
(``work.unit_of_work``: one transaction, the board's row locked, Events
recorded, published after commit). The modules, by noun:

- ``work``: the unit of work, ``Outcome``, the shared input checks;
- ``lifecycle``: the task state machine, every status rule and the approval gate;
- ``graph``: references, dependency edges, cycles, parents;
- ``leases``: renewing leases, the heartbeat, and the sweep that reclaims lapsed ones
  (run in a thread by ``boards.boot``);
- ``outbox``: the webhook deliveries a write records (sending is ``boards.delivery``'s);
- ``tasks``, ``approvals``, ``boards``, ``members``, ``messages``, ``agents``: the services.
"""

from .agents import (
    agent_remove,
    agent_seen,
    agents_sweep,
    owner_name,
    token_issue,
    token_revoke,
)
from .approvals import approval_decide, approval_request, approval_require
from .boards import SETTINGS as BOARD_SETTINGS
from .boards import board_create, board_reset, board_settings
from .decisions import cancel_chain, go_on_without, needs_sweep, release, reopen
from .hooks import (
    Verdict,
    gate_rule_add,
    gate_rule_remove,
    gate_rules_default,
    session_event,
    tool_call_decide,
    tool_call_expire,
    tool_calls_expire,
    verdict_of,
)
from .leases import heartbeat as task_heartbeat
from .leases import renew as leases_renew
from .leases import sweep as leases_sweep
from .members import (
    invite_accept,
    invite_check,
    invite_create,
    invite_find,
    invite_revoke,
    member_remove,
    member_set,
)
from .messages import inbox_read, message_send
from .tasks import (
    task_batch,
    task_claim,
    task_claim_next,
    task_create,
    task_delete,
    task_reassign,
    task_update,
)
from .webhooks import (
    delivery_redeliver,
    subscription_set,
    webhook_add,
    webhook_change,
    webhook_remove,
    webhook_test,
)
from .work import UNSET, Grant, Outcome, acting_with

__all__ = [
    "BOARD_SETTINGS",
    "UNSET",
    "Grant",
    "Outcome",
    "Verdict",
    "acting_with",
    "agent_remove",
    "agent_seen",
    "agents_sweep",
    "approval_decide",
    "approval_request",
    "approval_require",
    "board_create",
    "board_reset",
    "board_settings",
    "cancel_chain",
    "delivery_redeliver",
    "gate_rule_add",
    "gate_rule_remove",
    "gate_rules_default",
    "go_on_without",
    "inbox_read",
    "invite_accept",
    "invite_check",
    "invite_create",
    "invite_find",
    "invite_revoke",
    "leases_renew",
    "leases_sweep",
    "member_remove",
    "member_set",
    "message_send",
    "needs_sweep",
    "owner_name",
    "release",
    "reopen",
    "session_event",
    "subscription_set",
    "task_batch",
    "task_claim",
    "task_claim_next",
    "task_create",
    "task_delete",
    "task_heartbeat",
    "task_reassign",
    "task_update",
    "token_issue",
    "token_revoke",
    "tool_call_decide",
    "tool_call_expire",
    "tool_calls_expire",
    "verdict_of",
    "webhook_add",
    "webhook_change",
    "webhook_remove",
    "webhook_test",
]

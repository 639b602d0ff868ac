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
- ``outbox``: the webhook deliveries a write records (sending is ``boards.webhooks.delivery``'s);
- ``tasks``, ``approvals``, ``boards``, ``members``, ``messages``, ``agents``: the services.
"""

from boards.core.services.agents import (
    agent_remove,
    agent_seen,
    agents_sweep,
    owner_name,
    token_issue,
    token_revoke,
)
from boards.core.services.approvals import approval_decide, approval_request, approval_require
from boards.core.services.boards import SETTINGS as BOARD_SETTINGS
from boards.core.services.boards import (
    board_create,
    board_reset,
    board_settings,
    install_board_defaults,
)
from boards.core.services.leases import heartbeat as task_heartbeat
from boards.core.services.leases import renew as leases_renew
from boards.core.services.leases import sweep as leases_sweep
from boards.core.services.members import (
    invite_accept,
    invite_check,
    invite_create,
    invite_find,
    invite_revoke,
    member_remove,
    member_set,
    username_taken,
)
from boards.core.services.messages import inbox_read, message_send
from boards.core.services.plans import PlanStep, plan_apply, plan_complete
from boards.core.services.pushes import push_acted_record, pushes_record
from boards.core.services.tasks import (
    task_batch,
    task_claim,
    task_claim_next,
    task_create,
    task_delete,
    task_reassign,
    task_update,
)
from boards.core.services.work import UNSET, Grant, Outcome, acting_with

__all__ = [
    "BOARD_SETTINGS",
    "UNSET",
    "Grant",
    "Outcome",
    "PlanStep",
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
    "inbox_read",
    "install_board_defaults",
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
    "owner_name",
    "plan_apply",
    "plan_complete",
    "push_acted_record",
    "pushes_record",
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
    "username_taken",
]

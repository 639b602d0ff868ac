"""The task store: boards, tasks, their dependencies, the event log, tokens, messages.

Models hold fields, constraints and small derived properties only. Every write
goes through ``boards.services``. The models live by noun in this package's modules
(``tasks``, ``access``, ``webhooks``, ``clients``); every layer imports them from here.
"""

from ..states import SessionState
from .access import (
    AGENT_NAME_MAX,
    AGENT_NAME_PUNCTUATION,
    Agent,
    AgentToken,
    Invite,
    Membership,
    Message,
    Role,
    Subscription,
    agent_name_problem,
    hash_token,
)
from .clients import CallState, ClientSession, GateRule, ToolCall
from .tasks import (
    GONE_FACTOR,
    LABELS_MAX,
    PRIORITY_BY_NAME,
    TERMINAL_STATUSES,
    UNFINISHED,
    AgentState,
    ApprovalState,
    Attempt,
    AttemptOutcome,
    Board,
    Dependency,
    Event,
    EventKind,
    FlowDay,
    Label,
    Priority,
    Reason,
    Status,
    Task,
    Usage,
    agent_state,
)
from .webhooks import Delivery, DeliveryStatus, Webhook

__all__ = [
    "AGENT_NAME_MAX",
    "AGENT_NAME_PUNCTUATION",
    "GONE_FACTOR",
    "LABELS_MAX",
    "PRIORITY_BY_NAME",
    "TERMINAL_STATUSES",
    "UNFINISHED",
    "Agent",
    "AgentState",
    "AgentToken",
    "ApprovalState",
    "Attempt",
    "AttemptOutcome",
    "Board",
    "CallState",
    "ClientSession",
    "Delivery",
    "DeliveryStatus",
    "Dependency",
    "Event",
    "EventKind",
    "FlowDay",
    "GateRule",
    "Invite",
    "Label",
    "Membership",
    "Message",
    "Priority",
    "Reason",
    "Role",
    "SessionState",
    "Status",
    "Subscription",
    "Task",
    "ToolCall",
    "Usage",
    "Webhook",
    "agent_name_problem",
    "agent_state",
    "hash_token",
]

"""What waits for a person, one row per reason (SPEC §12).

Each row says what the item asks (one sentence), the action recommended first and the
others, each with the capability it needs (``permissions.ACTIONS``). The Needs-you
reads (``boards.needs.reads``), the activity feed's sentences and the board's strip all
read this table; a reason with no row fails loudly (``reason_row``) instead of borrowing
another's actions. When each reason holds is a rule (``rules.needs_of``).
"""

from __future__ import annotations

from dataclasses import dataclass

from boards.core.states import APPROVAL_REQUESTED, FAILED, NEEDS_ATTENTION, Reason


@dataclass(frozen=True)
class Act:
    """One action on an item: its name (a task action's URL part), its label, the
    capability it needs, and whether it opens the task's panel (a GET: the choice needs
    more than a click, such as whom to give the task to)."""

    action: str
    label: str
    needs: str
    opens_panel: bool = False


@dataclass(frozen=True)
class ReasonRow:
    question: str
    recommended: Act | None
    actions: tuple[Act, ...]
    # The question once the task's attempts are used up ({failures}, {max_attempts}).
    question_exhausted: str = ""
    # Recommended instead when the task's owner is silent or gone (it reads no message);
    # the row's own recommendation then joins the others.
    owner_away: Act | None = None
    question_owner_away: str = ""
    # The signal an item of this reason notifies as (a person chooses signals).
    signal: str = NEEDS_ATTENTION

    def recommended_for(self, owner_away: bool) -> Act | None:
        """The action recommended first, as the owner's liveness has it."""
        return self.owner_away if owner_away and self.owner_away else self.recommended

    def actions_for(self, owner_away: bool) -> tuple[Act, ...]:
        """The other actions, as the owner's liveness has it."""
        if not (owner_away and self.owner_away):
            return self.actions
        first = (self.recommended,) if self.recommended else ()
        return tuple(a for a in self.actions if a != self.owner_away) + first


MESSAGE = Act("message", "Message", "message")
RELEASE = Act("release", "Release to anyone", "reassign")
REASSIGN = Act("open", "Reassign…", "reassign", opens_panel=True)
SKIP = Act("skip", "Go on without it", "unblock")

REASONS: dict[str, ReasonRow] = {
    Reason.APPROVAL: ReasonRow(
        "waits for a person's approval",
        None,
        (Act("approve", "Approve", "approve"), Act("deny", "Deny", "deny")),
        signal=APPROVAL_REQUESTED,
    ),
    Reason.FAILED: ReasonRow(
        "failed, and work waits on it; retry it, go on without it, or cancel the chain",
        Act("retry", "Retry", "retry"),
        (
            SKIP,
            Act("cancel-chain", "Cancel it and what waits on it", "status"),
            Act("open", "Retry as another agent's…", "reassign", opens_panel=True),
        ),
        question_exhausted=(
            "failed or timed out {failures} time{plural} (the board allows {max_attempts}); "
            "retry it, reassign it or cancel it"
        ),
        signal=FAILED,
    ),
    Reason.STRANDED: ReasonRow(
        "was cancelled or denied, and work waits on it; go on without it, reopen it, "
        "or cancel what waits on it",
        SKIP,
        (
            Act("reopen", "Reopen it", "status"),
            Act("cancel-chain", "Cancel what waits on it", "status"),
        ),
    ),
    Reason.NOT_STARTED: ReasonRow(
        "was assigned and its owner has not started it; reassign it or release it",
        REASSIGN,
        (RELEASE, MESSAGE),
        question_owner_away=(
            "was assigned and its owner is {state}: it will not start it; reassign it or release it"
        ),
    ),
    Reason.NO_PROGRESS: ReasonRow(
        "has made no progress for a long while; message its owner, release or reassign it",
        MESSAGE,
        (RELEASE, REASSIGN),
        owner_away=RELEASE,
        question_owner_away=(
            "has made no progress for a long while and its owner is {state}: it reads no "
            "message; release it or reassign it"
        ),
    ),
    Reason.UNATTENDED: ReasonRow(
        "is ready and every agent of the board is gone: nobody will take it; connect an "
        "agent, or give it to one",
        Act("open", "Assign…", "reassign", opens_panel=True),
        (),
    ),
    # Read after the call (``reads.ran_item``): "ran Bash `rm -rf build` without …".
    Reason.TAMPERING: ReasonRow(
        "without the board's verdict: its hook was stopped. Its token is suspended until "
        "you clear this; clear it once you have looked (its session may go on), or "
        "revoke the token",
        Act("clear", "Clear", "approve"),
        (Act("revoke-token", "Revoke token", "tokens"),),
        # As urgent as an approval: whoever is told of approvals is told of this.
        signal=APPROVAL_REQUESTED,
    ),
    Reason.SESSION_WAITING: ReasonRow(
        "waits for you in its session",
        Act("open", "Open the session", "view"),
        (),
    ),
}


def reason_row(reason: str) -> ReasonRow:
    """The row of ``reason``; an unknown reason is a programming error, said at once."""
    try:
        return REASONS[reason]
    except KeyError:
        raise LookupError(f"Needs-you reason {reason!r} has no row in REASONS") from None


def question(reason: str, failures: int = 0, max_attempts: int = 0, owner_state: str = "") -> str:
    """What an item of ``reason`` asks, in one sentence; ``owner_state``: the owner is
    "silent" or "gone" (its row may ask otherwise then)."""
    row = reason_row(reason)
    if owner_state and row.question_owner_away:
        return row.question_owner_away.format(state=owner_state)
    if row.question_exhausted and max_attempts and failures >= max_attempts:
        return row.question_exhausted.format(
            failures=failures, plural="s" if failures != 1 else "", max_attempts=max_attempts
        )
    return row.question

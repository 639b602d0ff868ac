"""People's forms: what the admin pages read from a post, parsed and type-checked.

A form reads text into the types its service takes (a whole number written in the
digits 0-9, a list of kinds, a choice); the service stays the one place that checks
the board's rules, and what it refuses is put beside the field it names (``submit``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.validators import ProhibitNullCharactersValidator
from django.http import HttpRequest
from django.utils.html import format_html

from boards.core import numbers, services
from boards.core.errors import PermissionDenied, ServiceError, StoreBusy
from boards.gates import matching
from boards.models import Board, Role

# -- fields ---------------------------------------------------------------------------------


class Text(forms.CharField):
    """Text handed to a service as typed: the service checks its length, emptiness and
    NUL, and names the field when it refuses (as it does for an agent)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)
        self.validators = [
            v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)
        ]


class WholeNumber(forms.CharField):
    """A whole number written in the digits 0-9 (``numbers``: Django's IntegerField reads
    "٣" as 3), or None when left empty; the service checks its range."""

    def __init__(self, *, max_digits: int = numbers.ID_DIGITS, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        self.max_digits = max_digits
        super().__init__(**kwargs)
        self.validators = []

    def to_python(self, value: Any) -> int | None:  # type: ignore[override]
        text = str(super().to_python(value)).strip()
        if not text:
            return None
        if numbers.foreign_digits(text):
            raise forms.ValidationError(numbers.FOREIGN_DIGITS)
        number = numbers.spelled(text, self.max_digits)
        if number is None:
            raise forms.ValidationError("a whole number, in the digits 0-9")
        return number


class TextList(forms.Field):
    """Every value posted under the field's name (checkboxes), as text."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        return [str(v) for v in value or []]


def _choice(choices: list[tuple[str, str]], **kwargs: Any) -> forms.ChoiceField:
    """A choice whose refusal lists what it takes ("one of viewer, operator, …")."""
    values = [value for value, _ in choices]
    message = f"one of {', '.join(values)}"
    return forms.ChoiceField(choices=choices, error_messages={"invalid_choice": message}, **kwargs)


# -- the one way a service's refusal reaches a form -----------------------------------------


FormT = TypeVar("FormT", bound=forms.Form)


def bound(request: HttpRequest, form_class: type[FormT], **kwargs: Any) -> FormT:
    """The form bound to the post (even an empty one), or unbound for a page's first view."""
    if request.method == "POST":
        return form_class(request.POST, **kwargs)
    return form_class(**kwargs)


def submit(form: forms.Form, act: Callable[[dict[str, Any]], object]) -> bool:
    """Whether ``act`` took the form's data: False when the form refuses it, or when the
    service ``act`` calls does. The service's refusal then goes on the field it names,
    else on the form as a whole (as the service said it), and the page shows the form
    again."""
    if not form.is_valid():
        return False
    try:
        act(form.cleaned_data)
    except (StoreBusy, PermissionDenied):
        raise  # not the form's fault: the refusal path answers 503 (Retry-After) or 403
    except ServiceError as exc:
        named = exc.details if isinstance(exc.details, list) else []
        fields = [d for d in named if isinstance(d, dict) and d.get("field") in form.fields]
        for detail in fields:
            form.add_error(detail["field"], detail["message"])
        if not fields:
            form.add_error(None, exc.message)
        return False
    return True


# The forms below label their fields by the names they post (and the services and the API
# use): a refusal reads "role: one of viewer, …" as an agent's would. Their inputs carry
# their own visible labels or aria-labels in the templates.

# -- boards ---------------------------------------------------------------------------------


class BoardCreateForm(forms.Form):
    """A new board from ``/boards/`` (site admins): ``services.board_create`` checks both."""

    slug = Text(label="slug")
    name = Text(label="name", required=False)


# -- tokens ---------------------------------------------------------------------------------


class TokenForm(forms.Form):
    agent = Text(label="agent")
    team = forms.BooleanField(required=False)
    admin = forms.BooleanField(required=False)


# -- the board's settings -------------------------------------------------------------------


def _number(label: str, placeholder: str = "", help_text: str = "", **attrs: Any) -> WholeNumber:
    """A setting's field; ``required=True`` marks the input required in the page only (a
    post without the field leaves the setting as it is)."""
    attrs = {
        "inputmode": "numeric",
        **({"placeholder": placeholder} if placeholder else {}),
        **attrs,
    }
    widget = forms.TextInput(attrs=attrs)
    return WholeNumber(label=label, help_text=help_text, widget=widget)


class SettingsForm(forms.Form):
    """The board's work settings by their public names (SPEC §5). A field the post does not
    carry leaves its setting as it is (``changes``); an empty one clears it."""

    leaseSeconds = _number(
        "Lease",
        help_text="How long a claim lasts without a call from its agent. Any call renews "
        "it; when it lapses the task returns to Pending for another agent.",
    )
    maxAttempts = _number(
        "Attempts before a person looks",
        help_text="After this many failed or timed-out attempts a task is no longer offered "
        "to agents and shows under “Needs your attention”.",
        required=True,
    )
    maxInProgressPerAgent = _number("In progress per agent", "no limit")
    maxInProgress = _number("In progress on the board", "no limit")
    silentAfterSeconds = _number(
        "An agent is silent after",
        help_text="An agent that makes no call for this long shows as “silent” on the roster "
        "and on the cards it holds; for ten times as long, “gone”.",
        required=True,
    )
    failureGraceSeconds = _number(
        "A failed task may be retried for",
        help_text="How long agents have to retry a failed task by themselves before it "
        "waits for a person.",
        required=True,
    )
    # Dollars as typed ("$12.50"): the service reads the amount and checks its range.
    budgetUsd = Text(
        label="Budget",
        widget=forms.TextInput(attrs={"inputmode": "decimal", "placeholder": "no budget"}),
    )

    # The page posts an empty hidden input of this name before the checkbox: an unticked
    # box is then a post that turns it off, not one that leaves it out.
    stepUpApprovals = forms.BooleanField(
        required=False,
        label="Approving a gated task needs a passkey (step-up)",
        help_text="For a person who has a passkey (they add one on their own page): approving "
        "a task that waits for approval, on the board or from a push, asks for it first. "
        "Gate rules mark their own held tool calls step-up. Denying never needs one.",
    )

    def __init__(self, *args: Any, board: Board, spent: str, **kwargs: Any) -> None:
        initial = {public: getattr(board, field) for public, field in SETTING_FIELDS.items()}
        initial["stepUpApprovals"] = board.step_up_approvals
        budget = board.budget_usd
        initial["budgetUsd"] = f"{budget:.2f}" if budget is not None else ""
        kwargs["initial"] = initial
        super().__init__(*args, **kwargs)
        lease = self.fields["leaseSeconds"].widget
        lease.attrs["placeholder"] = f"{settings.KANBAN_LEASE_SECONDS} (server default)"
        self.fields["budgetUsd"].help_text = format_html(
            "Agents report what their work costs. Spent so far: {}. Once the spend reaches "
            "the budget, claims answer 409 <code>budget_exhausted</code> until it is raised "
            "here.",
            spent,
        )

    def clean_budgetUsd(self) -> str | None:
        return self.cleaned_data["budgetUsd"].strip().lstrip("$") or None

    def changes(self) -> dict[str, Any]:
        """The settings the post carries, for ``services.board_settings``."""
        return {name: value for name, value in self.cleaned_data.items() if name in self.data}


SETTING_FIELDS = {
    "leaseSeconds": "lease_seconds",
    "maxAttempts": "max_attempts",
    "maxInProgressPerAgent": "max_in_progress_per_agent",
    "maxInProgress": "max_in_progress",
    "silentAfterSeconds": "silent_after_seconds",
    "failureGraceSeconds": "failure_grace_seconds",
}


# -- members and invites --------------------------------------------------------------------


class MemberForm(forms.Form):
    """Add a person who has an account, or change a member's role."""

    username = Text(
        label="username",
        widget=forms.TextInput(
            attrs={
                "required": True,
                "maxlength": 150,
                "placeholder": "username",
                "aria-label": "Username",
            }
        ),
    )
    role = _choice(Role.choices, label="role", widget=forms.Select(attrs={"aria-label": "Role"}))


class InviteForm(forms.Form):
    role = _choice(Role.choices, label="role")


class MemberRemoveForm(forms.Form):
    remove = Text(label="username")


class AgentRemoveForm(forms.Form):
    remove_agent = Text(label="agent")


class InviteRevokeForm(forms.Form):
    revoke_invite = WholeNumber(label="invite", required=True)


class SignUpForm(forms.Form):
    """A person's new account, from an invite: Django's username rules and the
    project's password validators (``AUTH_PASSWORD_VALIDATORS``)."""

    username = forms.CharField(
        max_length=150,
        validators=[UnicodeUsernameValidator()],
        help_text="Letters, digits and @ . + - _ only; up to 150 characters.",
        widget=forms.TextInput(attrs={"autocomplete": "username", "autofocus": True}),
    )
    password1 = forms.CharField(
        label="Password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=password_validation.password_validators_help_text_html(),
    )
    password2 = forms.CharField(
        label="Password again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean_username(self) -> str:
        username: str = self.cleaned_data["username"]
        if services.username_taken(username):
            raise forms.ValidationError(
                f"The username {username!r} is taken, or looks like one that is; choose another."
            )
        return username

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        first, second = data.get("password1"), data.get("password2")
        if first and second and first != second:
            self.add_error("password2", "The two passwords differ.")
        elif first:
            person = get_user_model()(username=data.get("username", ""))
            try:
                password_validation.validate_password(first, person)
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


# -- gate rules -----------------------------------------------------------------------------


class GateRuleForm(forms.Form):
    """A new gate rule, in people's words (the service checks it again: one rule, one place)."""

    tool = forms.CharField(
        max_length=matching.TOOL_GLOB_MAX, label="Tools (e.g. Bash, Write|Edit, mcp__*)"
    )
    pattern = forms.CharField(
        max_length=matching.PATTERN_MAX,
        required=False,
        label="Pattern over the command, path or URL",
    )
    outside_cwd = forms.BooleanField(
        required=False, label="Only paths outside the session's folder"
    )
    decision = forms.ChoiceField(choices=[(d, d) for d in matching.DECISIONS], initial=matching.ASK)
    wait_seconds = WholeNumber(
        required=True,
        initial=matching.WAIT_DEFAULT,
        label="Wait for a person (seconds)",
        widget=forms.TextInput(attrs={"inputmode": "numeric"}),
    )
    fallback = forms.ChoiceField(
        choices=[(d, d) for d in matching.FALLBACKS],
        initial=matching.DENY,
        label="If nobody answers",
    )
    note = forms.CharField(max_length=matching.NOTE_MAX, required=False, label="What it guards")
    step_up = forms.BooleanField(
        required=False,
        label="Step-up: approving what it holds needs the person's passkey (if they have one)",
    )

    def clean_wait_seconds(self) -> int:
        wait: int = self.cleaned_data["wait_seconds"]
        if not matching.WAIT_MIN <= wait <= matching.WAIT_MAX:
            raise forms.ValidationError(f"{matching.WAIT_MIN} to {matching.WAIT_MAX} seconds")
        return wait

    # Where a new rule goes: before the rule with this number (empty: after the others).
    before = WholeNumber(label="Before rule number (empty: last)")


class GateRuleChangeForm(GateRuleForm):
    """A rule changed in place: the same fields as a new one, and which rule it is."""

    change = WholeNumber(label="The rule to change", required=True, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["before"]


class GateRuleRemoveForm(forms.Form):
    remove = WholeNumber(label="The rule to remove", required=True)


class GateRuleMoveForm(forms.Form):
    """A rule moved to another number (1 is matched first)."""

    move = WholeNumber(label="The rule to move", required=True)
    to = WholeNumber(label="to", required=True)


class GateRuleTestForm(forms.Form):
    """A call to try against the rules: nothing is saved."""

    tool = forms.CharField(max_length=matching.TOOL_GLOB_MAX, initial="Bash", label="Tool")
    text = forms.CharField(
        max_length=2 * matching.INPUT_MATCH_MAX,
        label="Command, path or URL",
        strip=False,
        widget=forms.TextInput(attrs={"placeholder": "rm -rf build"}),
    )
    cwd = forms.CharField(max_length=1000, required=False, label="In the folder")


# -- webhooks -------------------------------------------------------------------------------


class WebhookForm(forms.Form):
    """A new endpoint: its URL, the kinds it is sent ("all": every kind) and its format."""

    url = Text(label="url")
    kinds = TextList(required=False, label="kinds")
    format = _choice([("json", "JSON"), ("slack", "Slack")], required=False, label="format")

    def clean_kinds(self) -> list[str]:
        kinds: list[str] = self.cleaned_data["kinds"]
        return [] if "all" in kinds else kinds


WEBHOOK_ACTIONS = ("pause", "resume", "rotate", "remove", "test", "redeliver")


class WebhookActionForm(forms.Form):
    """A button on an endpoint (``webhook``) or on one of its deliveries (``delivery``)."""

    action = _choice([(a, a) for a in ("add", *WEBHOOK_ACTIONS)], label="action")
    webhook = WholeNumber(label="webhook")
    delivery = WholeNumber(label="delivery")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        needed = "delivery" if data.get("action") == "redeliver" else "webhook"
        if needed not in self.errors and data.get(needed) is None:
            self.add_error(needed, "which one: its number")
        return data

"""The demo's plan: a software project ("Ship the billing page") as one TaskBatch.

Each step names its parent and the steps it waits on by ref; ``outcome_for`` decides,
from the seed and the task alone, whether a step fails and how long it takes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

FAILURE_RATE = 0.10


@dataclass(frozen=True)
class Step:
    ref: str
    subject: str
    active: str
    parent: str | None
    after: tuple[str, ...]
    estimate: float  # seconds of simulated work at --speed 1
    prompt: str
    result: str
    failure: str = ""
    approval: bool = False
    description: str = ""


PLAN_SUBJECT = "Ship the billing page"
PLAN: tuple[Step, ...] = (
    Step(
        "ship",
        PLAN_SUBJECT,
        "Shipping the billing page",
        None,
        ("design", "backend", "frontend", "release"),
        2,
        "Confirm every phase is done and close the project.",
        "Billing page live for all customers; project closed.",
        "the launch checklist has an unchecked legal review",
        description="Customers can see their plan, pay invoices by card and download past "
        "invoices from a new billing page.",
    ),
    Step(
        "design",
        "Design the billing page",
        "Signing off the billing page design",
        "ship",
        ("spec", "mockups"),
        2,
        "Review the spec and the mockups together and sign off the design.",
        "Design signed off: spec v2 and mockups approved by product.",
        "product wants a second round on the plan comparison table",
    ),
    Step(
        "spec",
        "Write the billing page spec",
        "Writing the billing page spec",
        "design",
        (),
        4,
        "Write a one-page spec: plans, invoices list, card payment, proration, taxes, "
        "empty and error states.",
        "Spec in docs/billing-page.md: 6 user stories, proration rules, tax handling.",
        "open question on proration for mid-cycle downgrades",
    ),
    Step(
        "mockups",
        "Draw the billing page mockups",
        "Drawing the billing page mockups",
        "design",
        ("spec",),
        5,
        "Draw desktop and mobile mockups for every state in the spec.",
        "Mockups for 5 states (desktop + mobile) in the design file, linked in the spec.",
        "the design file's shared library is locked by another team",
    ),
    Step(
        "backend",
        "Build the billing backend",
        "Reviewing the billing backend",
        "ship",
        ("schema", "migration", "invoice-api", "stripe", "webhooks", "api-tests"),
        2,
        "Review the backend pull requests as a whole and merge them.",
        "Backend merged: invoice model, API, Stripe integration and webhooks.",
        "a reviewer found the webhook handler is not idempotent",
    ),
    Step(
        "schema",
        "Design the invoice schema",
        "Designing the invoice schema",
        "backend",
        ("spec",),
        3,
        "Design tables for invoices, invoice lines and payments; money as integer cents.",
        "Schema: invoice, invoice_line, payment; amounts in cents, currency per invoice.",
        "currency handling conflicts with the existing accounts table",
    ),
    Step(
        "migration",
        "Write the invoice migration",
        "Writing the invoice migration",
        "backend",
        ("schema",),
        3,
        "Write an additive (expand-only) migration for the invoice schema; no locks on "
        "large tables.",
        "Migration 0042_invoices: 3 new tables, 2 indexes, runs in 0.8 s on a prod copy.",
        "the migration locks the accounts table for 40 s on a production copy",
    ),
    Step(
        "invoice-api",
        "Write the invoice API",
        "Writing the invoice API",
        "backend",
        ("migration",),
        6,
        "Add GET /invoices, GET /invoices/<id> and GET /invoices/<id>/pdf with pagination.",
        "Invoice API: 3 endpoints, paginated, PDF rendering, 24 unit tests.",
        "PDF rendering needs a font the container image does not ship",
    ),
    Step(
        "stripe",
        "Integrate Stripe payments",
        "Integrating Stripe payments",
        "backend",
        ("schema",),
        6,
        "Create payment intents for open invoices and record the payment on success.",
        "Stripe payment intents wired in; card payments recorded against invoices.",
        "the Stripe sandbox keys in the vault have expired",
    ),
    Step(
        "webhooks",
        "Handle Stripe webhooks",
        "Handling Stripe webhooks",
        "backend",
        ("stripe",),
        4,
        "Handle payment_intent.succeeded / payment_failed, verify signatures, be idempotent.",
        "Webhook endpoint verifies signatures and handles 4 event types idempotently.",
        "webhook signatures fail to verify behind the load balancer",
    ),
    Step(
        "api-tests",
        "Test the invoice API",
        "Testing the invoice API",
        "backend",
        ("invoice-api", "webhooks"),
        4,
        "Write integration tests for the invoice API and the webhook flow.",
        "31 integration tests pass; coverage of billing/ at 94%.",
        "the webhook integration test is flaky against the Stripe sandbox",
    ),
    Step(
        "frontend",
        "Build the billing frontend",
        "Reviewing the billing frontend",
        "ship",
        ("page-ui", "payment-form", "wire-up", "a11y"),
        2,
        "Review the frontend pull requests together and merge them.",
        "Frontend merged: billing page, payment form, API wiring.",
        "the bundle grew by 180 kB over the budget",
    ),
    Step(
        "page-ui",
        "Build the billing page layout",
        "Building the billing page layout",
        "frontend",
        ("mockups",),
        5,
        "Build the page from the mockups: current plan, invoice list, empty and error states.",
        "Billing page layout with plan summary and invoice table, responsive.",
        "the design system has no table component for mobile",
    ),
    Step(
        "payment-form",
        "Build the payment form",
        "Building the payment form",
        "frontend",
        ("page-ui",),
        4,
        "Build the card form with Stripe Elements, validation and error messages.",
        "Payment form with Stripe Elements, inline validation, 3-D Secure handled.",
        "Stripe Elements does not load under the page's content security policy",
    ),
    Step(
        "wire-up",
        "Connect the page to the invoice API",
        "Connecting the page to the invoice API",
        "frontend",
        ("payment-form", "invoice-api"),
        3,
        "Load invoices from the API, paginate, download PDFs, pay open invoices.",
        "Page reads the invoice API: pagination, PDF download, pay-now flow.",
        "the API's pagination cursor is not URL-safe",
    ),
    Step(
        "a11y",
        "Check the billing page's accessibility",
        "Checking the billing page's accessibility",
        "frontend",
        ("page-ui",),
        2,
        "Check keyboard navigation, focus order, labels and contrast (WCAG 2.1 AA).",
        "Accessibility checked: 2 contrast fixes, labels on every input, axe clean.",
        "screen readers do not announce the invoice status column",
    ),
    Step(
        "release",
        "Release the billing page",
        "Releasing the billing page",
        "ship",
        ("docs", "prod-migration", "staging", "e2e", "deploy", "monitor", "announce"),
        2,
        "Confirm the release checklist is complete.",
        "Release checklist complete.",
        "the release checklist is missing the rollback plan",
    ),
    Step(
        "docs",
        "Document the invoice API",
        "Documenting the invoice API",
        "release",
        ("invoice-api",),
        3,
        "Document the three invoice endpoints with examples in the API reference.",
        "API reference updated: 3 endpoints with request and response examples.",
        "the docs build breaks on the new OpenAPI file",
    ),
    Step(
        "prod-migration",
        "Run the production migration",
        "Running the production migration",
        "release",
        ("migration",),
        3,
        "Run migration 0042_invoices on the production database in the maintenance window. "
        "This changes production: wait for a person's approval.",
        "Migration 0042_invoices applied on production in 1.1 s; no lock waits.",
        "the production database is in read-only failover",
        approval=True,
    ),
    Step(
        "staging",
        "Deploy to staging",
        "Deploying to staging",
        "release",
        ("backend", "frontend"),
        3,
        "Deploy the merged backend and frontend to staging.",
        "Staging runs build 2024.11.3 with the billing page behind a flag.",
        "the staging deploy ran out of disk on the build runner",
    ),
    Step(
        "e2e",
        "Run the checkout tests on staging",
        "Running the checkout tests on staging",
        "release",
        ("staging",),
        4,
        "Run the end-to-end checkout suite on staging with a test card.",
        "End-to-end checkout suite green on staging (12 scenarios).",
        "3-D Secure challenge times out on staging",
    ),
    Step(
        "deploy",
        "Deploy the billing page to production",
        "Deploying the billing page to production",
        "release",
        ("e2e", "prod-migration"),
        3,
        "Deploy to production and turn the billing page flag on for everyone.",
        "Production runs build 2024.11.3; billing page flag on for 100%.",
        "the canary's error rate crossed 2% and the deploy rolled back",
    ),
    Step(
        "monitor",
        "Watch error rates after launch",
        "Watching error rates after launch",
        "release",
        ("deploy",),
        3,
        "Watch errors, payment failures and latency for the first hour after launch.",
        "First hour: error rate 0.02%, 148 payments, p95 latency 210 ms.",
        "payment failures at 9% since launch: card declines mislabelled",
    ),
    Step(
        "announce",
        "Announce the billing page to customers",
        "Announcing the billing page to customers",
        "release",
        ("deploy",),
        2,
        "Post the changelog entry and email customers about the new billing page.",
        "Changelog posted; announcement email sent to 3,412 customers.",
        "the email provider flagged the announcement as promotional",
    ),
)
STEPS = {step.ref: step for step in PLAN}


def plan_ops(run: str) -> list[dict[str, Any]]:
    """The whole plan as one TaskBatch: creates that name each other by ref."""
    ops = []
    for step in PLAN:
        op: dict[str, Any] = {
            "op": "create",
            "ref": step.ref,
            "subject": step.subject,
            "activeForm": step.active,
            "prompt": step.prompt,
            "metadata": {"plan": run, "ref": step.ref, "estimate": f"{step.estimate:g}h"},
        }
        if step.description:
            op["description"] = step.description
        if step.parent:
            op["parentId"] = step.parent
        if step.after:
            op["blockedBy"] = list(step.after)
        if step.approval:
            op["requiresApproval"] = True
        ops.append(op)
    return ops


def outcome_for(seed: int, task: dict[str, Any]) -> tuple[bool, float]:
    """(fails?, work seconds at speed 1) — decided by the seed and the task alone,
    so a run is the same whichever worker claims which task."""
    key = (task.get("metadata") or {}).get("ref") or f"task-{task['id']}"
    rng = random.Random(f"{key}/{seed}")
    fails = rng.random() < FAILURE_RATE
    step = STEPS.get(key)
    estimate = step.estimate if step else 3.0
    return fails, estimate * rng.uniform(0.6, 1.4)


# The simulated model's price per token (US dollars), for the usage the demo reports.
DEMO_MODEL = "demo-model-1"
PRICE_IN, PRICE_OUT = 3e-6, 15e-6


def usage_for(seed: int, task: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The tokens and cost a simulated worker reports for a step: about 2,000 input and
    300 output tokens a second of work, decided by the seed and the task alone."""
    key = (task.get("metadata") or {}).get("ref") or f"task-{task['id']}"
    rng = random.Random(f"usage/{key}/{seed}")
    tokens_in = int(seconds * 2000 * rng.uniform(0.7, 1.3)) + 500
    tokens_out = int(seconds * 300 * rng.uniform(0.7, 1.3)) + 50
    return {
        "inputTokens": tokens_in,
        "outputTokens": tokens_out,
        "costUsd": round(tokens_in * PRICE_IN + tokens_out * PRICE_OUT, 6),
        "model": DEMO_MODEL,
    }

"""The OpenAPI 3.1 document of the tool endpoint and the read-only JSON endpoints beside
it, generated from the registry's tools and their models."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from boards.agents.registry import Tool
from boards.core import limits, numbers
from boards.core.errors import CONFLICT_DETAILS, ErrorBody
from boards.core.metrics import RANGE_KEYS


def _components(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    """``model``'s schema for an OpenAPI document, its own models added to ``components``."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(schema.pop("$defs", {}))
    return schema


def openapi_document(tools: Iterable[Tool]) -> dict[str, Any]:
    """OpenAPI 3.1 description of the tool endpoint, generated from the tools' models."""
    components: dict[str, Any] = {}
    components["Error"] = _components(ErrorBody, components)
    error = "#/components/schemas/Error"
    invalid = _typed_error(
        components, "InvalidInputError", {"$ref": "#/components/schemas/FieldErrors"}
    )
    components["FieldErrors"] = {
        "type": "array",
        "items": {"$ref": "#/components/schemas/FieldError"},
    }
    conflict = _typed_error(
        components,
        "ConflictError",
        {
            "anyOf": [
                {"$ref": f"#/components/schemas/{m.__name__}"} for m in CONFLICT_DETAILS.values()
            ]
        },
    )
    paths: dict[str, Any] = {}
    errors = {
        str(code): {
            "description": text,
            "content": {"application/json": {"schema": {"$ref": ref}}},
        }
        for code, text, ref in [
            (400, "Invalid input; details name every wrong field", invalid),
            (401, "No or unknown token", error),
            (403, "Token of another board, or revoked", error),
            (404, "Unknown board, tool or task", error),
            (409, "Conflict: claim lost, blocked, stale version; details by code", conflict),
            (413, "Body too large", error),
            # Refused at the edge, before any door reads the request (kanban.edge).
            (414, "Request line (path and query) too long", error),
            (431, "Request headers too large", error),
        ]
    }
    for t in tools:
        model = t.input
        schema = _components(model, components)
        schema.pop("description", None)  # the operation's description says it
        components[model.__name__] = schema
        ok = {
            "description": "The tool's answer",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
        responses = {"200": ok, **errors}
        if t.accepted:
            responses["202"] = {**ok, "description": t.accepted}
        paths[f"/api/boards/{{slug}}/tools/{t.name}"] = {
            "post": {
                "operationId": t.name,
                "summary": t.description.split(". ")[0],
                "description": t.description,
                "parameters": [
                    {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{model.__name__}"}
                        }
                    },
                },
                "responses": responses,
                "security": [{"bearer": []}],
            }
        }
    paths["/api/boards/{slug}/tools"] = {
        "get": {
            "operationId": "listTools",
            "summary": "Tool definitions (Anthropic format, or OpenAI with ?format=openai)",
            "parameters": [
                {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "format",
                    "in": "query",
                    "required": False,
                    "schema": {"type": "string", "enum": ["anthropic", "openai"]},
                },
            ],
            "responses": {
                "200": {
                    "description": "Tool definitions",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "400": errors["400"],
                "404": errors["404"],
                "414": errors["414"],
                "431": errors["431"],
            },
        }
    }
    paths.update(_read_paths(errors))
    return {
        "openapi": "3.1.0",
        "info": {"title": "Agent Kanban tool API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _typed_error(components: dict[str, Any], name: str, details: dict[str, Any]) -> str:
    """An error schema whose ``details`` are ``details`` (a 400's, a 409's), as a component."""
    components[name] = {
        "allOf": [
            {"$ref": "#/components/schemas/Error"},
            {"properties": {"error": {"properties": {"details": details}}}},
        ]
    }
    return f"#/components/schemas/{name}"


def _read_paths(errors: dict[str, Any]) -> dict[str, Any]:
    """The read-only JSON endpoints beside the tools: the event log and the metrics."""

    def query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
        return {
            "name": name,
            "in": "query",
            "required": False,
            "schema": schema,
            "description": description,
        }

    slug = {"name": "slug", "in": "path", "required": True, "schema": {"type": "string"}}
    whole = {"type": "integer"}
    answers = {
        "200": {
            "description": "The answer",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **{code: errors[code] for code in ("400", "401", "403", "404", "414", "431")},
    }
    events = [
        query("after", {**whole, "minimum": 0, "maximum": 2**62}, "Events after this seq."),
        query("limit", {**whole, "minimum": 1, "maximum": limits.ACTIVITY_MAX}, "Events per page."),
        query("taskId", {**whole, "minimum": 1, "maximum": 2**31 - 1}, "Only this task's."),
        query("actor", {"type": "string"}, "Only this agent's or person's."),
        query("kind", {"type": "string"}, "Only events of this kind."),
    ]
    window = f"YYYY-MM-DD, in the years {numbers.YEAR_MIN} to {numbers.YEAR_MAX}"
    measures = [
        query(
            "range",
            {"type": "string", "enum": list(RANGE_KEYS)},
            "The last hour (in minutes), today (in hours), 7 or 30 days (in days); by default "
            "the smallest that holds the board's activity of the last 30 days.",
        ),
        query("today", {"type": "string", "format": "date"}, f"The last day ({window})."),
    ]
    return {
        "/api/boards/{slug}/events": {
            "get": {
                "operationId": "listEvents",
                "summary": "The board's event log, oldest first (an admin-scoped token)",
                "parameters": [slug, *events],
                "responses": answers,
                "security": [{"bearer": []}],
            }
        },
        "/api/boards/{slug}/metrics": {
            "get": {
                "operationId": "boardMetrics",
                "summary": "Flow metrics and cost of the board (any token of the board)",
                "parameters": [slug, *measures],
                "responses": answers,
                "security": [{"bearer": []}],
            }
        },
    }

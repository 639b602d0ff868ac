"""The tool registry: ``@tool`` on a handler (``boards.agents.handlers``, ``boards.agents.dialects``)
declares it in ``TOOLS``, with its input and answer models, its hints and its
description (the input model's docstring); ``boards.agents.pipeline`` reads it for every door,
and the tool listings take each tool's definition from here (Anthropic and OpenAI
formats). The inputs themselves are ``boards.agents.schemas``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from pydantic import BaseModel, ConfigDict

from boards.core.errors import ErrorBody


class ToolInput(BaseModel):
    """A tool's input: strict, and a field it does not know is refused."""

    model_config = ConfigDict(extra="forbid", strict=True, validate_by_name=False)


@dataclass(frozen=True)
class Hints:
    """What a client may assume of a tool (MCP tool annotations), and its human title."""

    title: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            # Only this board: nothing outside it is read or changed.
            "openWorldHint": False,
        }


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic schema as plain JSON Schema 2020-12: no OpenAPI ``discriminator``
    keyword (strict validators refuse unknown keywords), no top-level title."""

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: clean(v) for k, v in node.items() if k != "discriminator"}
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    schema = clean(schema)
    schema.pop("title", None)
    return schema


def one_paragraph(doc: str | None) -> str:
    """A docstring as one paragraph: its lines joined by single spaces."""
    return " ".join(line.strip() for line in inspect.cleandoc(doc or "").splitlines())


Handler = Callable[..., Any]


@dataclass(frozen=True)
class Tool:
    """One tool as its handler's ``@tool`` declares it. Every door (``boards.agents.pipeline``), the
    tool listings, the OpenAPI document, MCP and the Connect page read these."""

    name: str
    input: type[ToolInput]
    handler: Handler
    description: str
    answer: type[BaseModel] | None = None
    hints: Hints | None = None
    # None: a canonical tool; else the seed whose agents call it (SPEC §4 "Seed dialects").
    dialect: str | None = None
    # What a 202 answer means, for a tool that may answer one.
    accepted: str = ""
    # Other names that call this tool (seed 002's namespaces); its groups are passed to
    # the handler as keyword arguments.
    pattern: re.Pattern[str] | None = None

    @property
    def waits(self) -> bool:
        """A waiting tool (TaskWatch) runs on the event loop, holding no thread or connection."""
        return inspect.iscoroutinefunction(self.handler)

    def called(self, name: str) -> Tool | None:
        """This tool as called by ``name``, or None when that name does not call it."""
        if self.pattern is None:
            return self if name == self.name else None
        match = self.pattern.match(name)
        if match is None:
            return None
        return replace(self, name=name, handler=partial(self.handler, **match.groupdict()))

    def input_schema(self) -> dict[str, Any]:
        schema = strict_schema(self.input.model_json_schema())
        schema.pop("description", None)  # the docstring: the tool's description, beside it
        return schema

    def output_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of the answer (boards.agents.answers), as clients validate it; a refusal's
        shape rides along in ``$defs`` as ``ToolError`` (an MCP client reads it as the text of
        a result with isError: true)."""
        if self.answer is None:
            return None
        schema = strict_schema(self.answer.model_json_schema(by_alias=True))
        error = ErrorBody.model_json_schema()
        schema["$defs"] = {
            **schema.get("$defs", {}),
            **error.pop("$defs"),
            "ToolError": strict_schema(error),
        }
        return schema

    def definition(self, fmt: str) -> dict[str, Any]:
        return definition(
            self.name, self.description, self.input_schema(), fmt, self.hints, self.output_schema()
        )


# Every tool, by name, in the order declared: filled by ``@tool`` as ``boards.agents.handlers``
# and ``boards.agents.dialects`` are imported. Read it through ``boards.agents.pipeline``, which imports both.
TOOLS: dict[str, Tool] = {}


def tool(
    *,
    name: str,
    input: type[ToolInput],
    answer: type[BaseModel] | None = None,
    hints: Hints | None = None,
    dialect: str | None = None,
    accepted: str = "",
    pattern: str | None = None,
    description: str | None = None,
) -> Callable[[Handler], Handler]:
    """Declare the decorated handler as the tool ``name``: the one declaration of a tool.

    Its description is the input model's docstring (``description`` adds to it what the
    model cannot say alone), its input and answer schemas are the models', its MCP
    annotations the ``hints``. A canonical tool needs an answer model and hints.
    """

    def register(handler: Handler) -> Handler:
        if name in TOOLS:
            raise ValueError(f"The tool {name!r} is declared twice")
        if dialect is None and (answer is None or hints is None):
            raise ValueError(f"The canonical tool {name!r} needs an answer model and hints")
        TOOLS[name] = Tool(
            name=name,
            input=input,
            handler=handler,
            description=description or one_paragraph(input.__doc__),
            answer=answer,
            hints=hints,
            dialect=dialect,
            accepted=accepted,
            pattern=re.compile(pattern) if pattern else None,
        )
        return handler

    return register


def definition(
    name: str,
    description: str,
    schema: dict[str, Any],
    fmt: str,
    hints: Hints | None = None,
    output: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One tool in Anthropic's ``{name, description, input_schema}`` shape or as OpenAI's
    function; the annotations ride along where the format has room for them."""
    if fmt == "openai":
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema},
        }
    tool: dict[str, Any] = {"name": name, "description": description, "input_schema": schema}
    if hints is not None:
        tool["title"] = hints.title
        tool["annotations"] = hints.as_dict()
    if output is not None:
        tool["output_schema"] = output
    return tool


def tool_definitions(tools: Iterable[Tool], fmt: str = "anthropic") -> list[dict[str, Any]]:
    """The tools as Anthropic's ``{name, description, input_schema}`` or OpenAI's functions."""
    return [t.definition(fmt) for t in tools]

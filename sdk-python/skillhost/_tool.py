"""``@tool``, the results a tool returns, and what a call receives."""

import json
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ._schema import Param, function_schema

__all__ = [
    "Context", "Coverage", "Image", "Json", "McpDecision", "Param", "ResourceLink", "Target", "ToolError", "ToolResult",
    "tool",
]

APPROVALS = ("none", "approve", "confirm", "dynamic")


@dataclass
class Context:
    """One call's context: the skill's config block, who asked, the turn's route, and the
    text of the turn's incoming message (``None`` outside a turn: ``skillhost call``, MCP)."""

    config: Dict[str, Any] = field(default_factory=dict)
    channel_id: str = ""
    user_id: Optional[str] = None
    route: Dict[str, str] = field(default_factory=dict)
    user_message: Optional[str] = None


@dataclass
class Coverage:
    """What a search covered (for a tool declared with ``declares_coverage=True``)."""

    status: str = "complete"  # or "partial"
    result_state: str = "data"  # or "empty"
    subject: Optional[str] = None
    attempted_scope: Optional[Dict[str, Any]] = None
    covered_scope: Optional[Dict[str, Any]] = None


@dataclass
class ToolResult:
    """What a tool returns when a plain value is not enough.

    ``content`` is sent to the model (a non-string is encoded as JSON); ``succeeded=False``
    is an application failure the model sees; ``is_empty`` and ``coverage`` are for API
    stream consumers. ``blocks`` is typed content after the text, for MCP clients: strings,
    :class:`Json`, :class:`Image` and :class:`ResourceLink` (the model reads a text rendering).
    """

    content: Any
    succeeded: Optional[bool] = True
    is_empty: Optional[bool] = None
    coverage: Optional[Coverage] = None
    blocks: List[Any] = field(default_factory=list)

    @staticmethod
    def ok(content: Any, **kwargs: Any) -> "ToolResult":
        """A successful result."""
        return ToolResult(content, True, **kwargs)

    @staticmethod
    def error(message: str, **details: Any) -> "ToolResult":
        """A failed result: ``{"error": message, ...details}``."""
        return ToolResult({"error": message, **details}, False)


@dataclass
class Json:
    """A JSON block: MCP clients also get it as ``structuredContent`` under an output schema."""

    value: Any


@dataclass
class Image:
    """An image block: its MIME type (``image/png``) and bytes; the model reads a placeholder."""

    mime_type: str
    data: bytes


@dataclass
class ResourceLink:
    """A link to a resource the client may read (``skill://<skill>/notes.md``)."""

    uri: str
    name: str
    mime_type: Optional[str] = None
    description: Optional[str] = None


class ToolError(Exception):
    """Raise from a tool for an application failure: the model reads ``{"error": message}``."""


@dataclass
class Target:
    """What ``tool_target`` returns: the entity a call queries and the kind of data."""

    target: Optional[str] = None
    query_kind: Optional[str] = None


@dataclass
class McpDecision:
    """What ``before_mcp_call`` returns (returning ``None`` proceeds unchanged)."""

    kind: str = "proceed"  # "deny", "prerequisite"
    corrected_arguments: Optional[Dict[str, Any]] = None
    correction: Optional[str] = None
    context: Optional[Dict[str, Any]] = None
    prerequisite_tool: Optional[str] = None
    prerequisite_arguments: Optional[Dict[str, Any]] = None

    @staticmethod
    def proceed(corrected_arguments: Optional[Dict[str, Any]] = None, context=None) -> "McpDecision":
        """Send the call, with replacement arguments when given."""
        return McpDecision("proceed", corrected_arguments, None, context)

    @staticmethod
    def deny(correction: str, context=None) -> "McpDecision":
        """Refuse the call; the model reads ``correction``."""
        return McpDecision("deny", None, correction, context)

    @staticmethod
    def prerequisite(tool: str, arguments: Dict[str, Any], correction: Optional[str] = None) -> "McpDecision":
        """Run the read-only ``tool`` (listed in ``MCP_PREREQUISITES``) first, then retry once."""
        return McpDecision("prerequisite", None, correction, None, tool, arguments)


@dataclass
class Definition:
    """One registered tool."""

    name: str
    description: str
    schema: Dict[str, Any]
    approval: str
    expose_result: bool
    declares_coverage: bool
    function: Callable[..., Any]
    wants_ctx: bool
    output_schema: Optional[Dict[str, Any]] = None
    hints: Dict[str, Any] = field(default_factory=dict)


TOOLS: List[Definition] = []


def tool(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    approval: str = "none",
    expose_result: bool = False,
    declares_coverage: bool = False,
    schema: Optional[Dict[str, Any]] = None,
    output_schema: Optional[Dict[str, Any]] = None,
    title: Optional[str] = None,
    read_only: Optional[bool] = None,
    destructive: Optional[bool] = None,
    idempotent: Optional[bool] = None,
    open_world: Optional[bool] = None,
):
    """Declares a tool: ``@tool`` or ``@tool(approval="approve", ...)``.

    The input schema comes from the parameters' type hints (``schema=`` replaces it), the
    description from the docstring's summary and each parameter's from its ``Args:`` entry.
    A parameter named ``ctx`` receives the call's :class:`Context`. The return value is the
    result: a :class:`ToolResult`, a string, or anything JSON can encode. ``output_schema``
    (a JSON object schema of the structured result) and the hints ``title``, ``read_only``,
    ``destructive``, ``idempotent``, ``open_world`` are what MCP clients see in ``tools/list``.
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if approval not in APPROVALS:
            raise ValueError(f"{fn.__qualname__}: approval must be one of {', '.join(APPROVALS)}, not {approval!r}")
        derived, summary = function_schema(fn, skip={"ctx"})
        text = description if description is not None else summary
        if not text:
            raise ValueError(f"{fn.__qualname__}: a tool needs a description (a docstring or description=)")
        wants_ctx = "ctx" in typing.get_type_hints(fn) or "ctx" in fn.__code__.co_varnames[: fn.__code__.co_argcount]
        TOOLS.append(
            Definition(
                name or fn.__name__, text, schema or derived, approval, expose_result, declares_coverage, fn, wants_ctx,
                output_schema,
                {"title": title, "read_only": read_only, "destructive": destructive, "idempotent": idempotent,
                 "open_world": open_world},
            )
        )
        return fn

    return register(fn) if fn is not None else register


def encode(content: Any) -> str:
    """A result's content as the text the model reads."""
    return content if isinstance(content, str) else json.dumps(content)

"""The routing context of a tool call: ``get_tool_route_context(ctx)``."""

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

__all__ = ["IncomingMessage", "ToolRouteContext", "get_tool_route_context"]

_FIELDS = ("text", "channel_id", "user_id")


class IncomingMessage:
    """The current turn's message, live for the turn.

    ``text``, ``channel_id`` and ``user_id`` describe it; any other attribute is one the host
    or an earlier tool of the turn attached (the turn's route attributes). Setting one, as a
    classifier does with ``message.route = "search"``, makes it visible to the later tool
    calls and ``before_mcp_call`` hooks of the same turn (as text: a non-string is sent as
    JSON). Turns never share attributes.
    """

    def __init__(self, text: Optional[str], channel_id: str, user_id: Optional[str], attributes: Dict[str, str]):
        values = {"text": text, "channel_id": channel_id, "user_id": user_id}
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_attributes", dict(attributes))

    def __getattr__(self, name: str) -> Any:
        values, attributes = self.__dict__["_values"], self.__dict__["_attributes"]
        if name in values:
            return values[name]
        if name in attributes:
            return attributes[name]
        raise AttributeError(f"the incoming message has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FIELDS or name.startswith("_"):
            raise AttributeError(f"the incoming message's {name!r} cannot be set")
        from skillhost import route

        self.__dict__["_attributes"][name] = value
        route.set_attribute(name, value if isinstance(value, str) else json.dumps(value))

    def __repr__(self) -> str:
        # Never the attributes: they may hold delegated credentials.
        return f"IncomingMessage(channel_id={self.channel_id!r})"


@dataclass(frozen=True)
class ToolRouteContext:
    """The frozen routing context: ``user_message`` (the turn's text, when the host gives it)
    and ``incoming_message`` (excluded from ``repr``; not from ``dataclasses.asdict``)."""

    user_message: Optional[str] = None
    incoming_message: Optional[IncomingMessage] = field(default=None, repr=False)


def get_tool_route_context(ctx: Any) -> Optional[ToolRouteContext]:
    """The call's :class:`ToolRouteContext`, or ``None`` when none was attached."""
    value = ctx.get("tool_route_context") if isinstance(ctx, dict) else getattr(ctx, "tool_route_context", None)
    return value if isinstance(value, ToolRouteContext) else None

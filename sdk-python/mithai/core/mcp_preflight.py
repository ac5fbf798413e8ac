"""``MCPPreflightDecision``: what ``before_mcp_call`` returns for a call to a server the skill owns."""

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

__all__ = ["KINDS", "MCPPreflightDecision", "MCPPrerequisite"]

KINDS = ("proceed", "deny", "prerequisite")


@dataclass
class MCPPrerequisite:
    """A read-only tool of the same server, listed in ``MCP_PREREQUISITES``, to run first."""

    tool: str
    arguments: Dict[str, Any] = field(default_factory=dict)
    server: Optional[str] = None


@dataclass
class MCPPreflightDecision:
    """The owning skill's decision before an MCP call is sent.

    ``kind="proceed"`` sends it (with ``corrected_arguments`` as a complete replacement when
    given; ``{}`` is valid), ``"deny"`` refuses it and the model reads ``correction``,
    ``"prerequisite"`` runs ``prerequisite`` first and retries the call once. ``context`` is
    safe policy metadata the model sees.
    """

    kind: str = "proceed"
    prerequisite: Optional[MCPPrerequisite] = None
    corrected_arguments: Optional[Dict[str, Any]] = None
    correction: Optional[str] = None
    context: Optional[Dict[str, Any]] = None

    def __post_init__(self) -> None:
        # Checked here so that a wrong decision fails at the author's line, not in the host.
        if self.kind not in KINDS:
            raise ValueError(f"MCPPreflightDecision kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if (self.kind == "prerequisite") != (self.prerequisite is not None):
            raise ValueError("MCPPreflightDecision: kind='prerequisite' goes with prerequisite=MCPPrerequisite(...)")

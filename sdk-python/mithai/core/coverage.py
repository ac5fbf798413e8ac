"""``CoverageObservation``: what a native tool searched (``ToolExecutionResult.coverage``)."""

from dataclasses import dataclass
from typing import Any, Dict, Optional


@dataclass
class CoverageObservation:
    """A tool's own account of what it searched, for a tool declared with ``declares_coverage``.

    ``status`` is ``"complete"`` or ``"partial"``, ``result_state`` ``"data"`` or ``"empty"``;
    only those two reach a public response. ``subject`` (at most 128 characters) and the two
    scopes (JSON objects, bounded by the host) stay in the turn's internal ledger.
    """

    status: str = "complete"
    result_state: str = "data"
    subject: Optional[str] = None
    attempted_scope: Optional[Dict[str, Any]] = None
    covered_scope: Optional[Dict[str, Any]] = None

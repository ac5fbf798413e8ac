"""``ToolExecutionResult``: what ``handle`` returns to declare success or failure explicitly."""

from dataclasses import dataclass
from typing import Any, Optional

from .coverage import CoverageObservation

__all__ = ["CoverageObservation", "ToolExecutionResult"]


@dataclass
class ToolExecutionResult:
    """A tool's result with its outcome declared.

    ``content`` is what the model reads (a non-string is encoded as JSON). ``succeeded=True``
    lets a tool with ``expose_result`` appear in ``tool_results`` of a synchronous trigger;
    ``succeeded=False`` is an ordinary application failure the model sees. Left out, the
    outcome is undeclared, as for a plain string: never exposed (fail-closed).
    """

    content: Any
    succeeded: Optional[bool] = None
    coverage: Optional[CoverageObservation] = None

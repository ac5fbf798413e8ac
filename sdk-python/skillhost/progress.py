"""Progress of a long call: ``progress.report(3, total=10, message="indexing")``.

An MCP client that sent a progress token hears each report as ``notifications/progress``;
for everyone else a report is a no-op. The host forwards at most one report every 50 ms (the
one reaching ``total`` always) and only reports whose progress grew."""

from typing import Optional


def report(progress: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
    """Reports ``progress`` so far, out of ``total`` when known."""
    from wit_world.imports import progress as raw

    raw.report_progress(float(progress), None if total is None else float(total), message)

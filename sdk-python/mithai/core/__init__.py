"""The ``mithai.core`` modules a skill imports: ``skill_loader``, ``context``, ``mcp_preflight``, ``coverage``."""

"""The mithai shim: runs a mithai ``tools.py`` unchanged as a skillhost component.

``skillhost skill build`` bundles this package (with the Python SDK it is written on) into a
folder that holds a mithai ``tools.py``. It provides the import paths the mithai skills
reference uses (``mithai.core.skill_loader``, ``mithai.core.context``,
``mithai.core.mcp_preflight``, ``mithai.core.coverage``), builds the ``ctx`` dict over the
host's imports (``_ctx``), maps ``TOOLS``, ``handle``, the hooks and the constants onto the
WIT exports (``_wit``, the one place that knows the contract), and replaces what cannot work
in the sandbox (threads, processes, sockets, ungranted environment variables) with errors
that name the author's file and line (``_sandbox``); ``urllib.request.urlopen`` goes through
the host's ``http`` import (``_net``).
"""

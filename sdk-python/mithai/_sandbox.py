"""What cannot work in skillhost's sandbox fails here, naming the author's file and line.

``install()`` runs before ``tools.py`` is imported (the generated entry module calls it), so
the author's module sees the guarded versions: threads (``threading``, ``_thread``), processes
(``subprocess``, ``os.system``, ``os.popen``), sockets (``socket``) and ``os.environ``, which
holds only what the skill was granted. Without the guards these fail deep inside the runtime
with messages such as ``can't start new thread`` or ``unknown encoding: idna``.

It also imports the standard modules skills commonly use: a component only has the modules
imported while it was built, so a ``import csv`` inside a function would otherwise fail.
"""

import os
import sys
from collections.abc import MutableMapping
from typing import Any, Dict, Iterator, Optional

# componentize-py maps the skill's folder (the build's first `-p`) to `/0/`.
AUTHOR = "/0/"

# Set by the WIT exports once a call runs (the build's import of tools.py runs without the
# host: its imports cannot be called then).
RUNTIME = {"on": False}

THREADS = (
    "a skill cannot start threads in the skillhost sandbox: every call (startup() too) runs in "
    "a fresh instance that ends with the call, so nothing it starts outlives it; do the work "
    "inside handle(), or schedule it outside the skill"
)
PROCESSES = (
    "a skill cannot start processes in the skillhost sandbox; the built-in shell skill "
    "(shell__run_command) runs the commands the operator allows, or an MCP server can"
)
SOCKETS = (
    "a skill has no sockets in the skillhost sandbox; HTTP goes through the host: "
    "urllib.request.urlopen works for hosts asked in skill.toml ([capabilities] http_hosts) "
    "and granted by the operator (skills.grants.<skill>.http_hosts)"
)
ENVIRON = (
    "is not granted to this skill: the skillhost sandbox has no environment variables but "
    "those granted; put the value in skills.config.<skill> and read ctx['config']"
)


class SandboxError(RuntimeError):
    """Something the sandbox cannot do; the message names the author's file and line."""


class EnvironNotGranted(SandboxError, KeyError):
    """``os.environ[name]`` of a variable not granted; a ``KeyError``, as for an unset one."""

    def __str__(self) -> str:
        return self.args[0]


def where(frame: Any = None) -> str:
    """``tools.py, line 12``: the innermost frame in the author's files, or ``""``."""
    frame = frame or sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(AUTHOR):
            return f"{name[len(AUTHOR):]}, line {frame.f_lineno}"
        frame = frame.f_back
    return ""


def where_raised(err: BaseException) -> str:
    """The author's innermost line in an exception's traceback, or ``""``."""
    found, tb = "", err.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.startswith(AUTHOR):
            found = f"{name[len(AUTHOR):]}, line {tb.tb_lineno}"
        tb = tb.tb_next
    return found


def refusal(what: str, why: str, kind: type = SandboxError) -> SandboxError:
    """The error for ``what``, prefixed with the author's line that led to it."""
    at = where(sys._getframe(1))
    return kind(f"{at}: {what} {why}" if at else f"{what} {why}")


def _guard(what: str, why: str):
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise refusal(f"{what}:", why)

    refused.__name__ = what
    return refused


class Environ(MutableMapping):
    """``os.environ`` in the sandbox: the granted variables and those the skill set itself.

    Reading another with ``os.environ[name]`` raises :class:`EnvironNotGranted` (a
    ``KeyError``); ``os.environ.get(name, default)`` and ``os.getenv`` return the default, as
    for an unset variable, and the host's log says which line read it.
    """

    def __init__(self) -> None:
        self._values: Dict[str, str] = {}
        self._reported: set = set()
        # The interpreter's own ``os.environ``: at run time it holds the guest's WASI
        # environment, which is exactly the variables the manifest asks for and the operator
        # grants (``[capabilities] env`` and ``skills.grants.<skill>.env``).
        self.base: Any = {}

    def _all(self) -> Dict[str, str]:
        merged = dict(self.base)
        merged.update(self._values)
        return merged

    def grant(self, values: Dict[str, str]) -> None:
        """Adds variables the operator granted (the host passes them to the hooks)."""
        self._values.update(values)

    def __getitem__(self, name: str) -> str:
        values = self._all()
        if name in values:
            return values[name]
        raise refusal(f"os.environ[{name!r}]", ENVIRON, EnvironNotGranted)

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        values = self._all()
        if name in values:
            return values[name]
        at = where(sys._getframe(1))
        if at and RUNTIME["on"] and name not in self._reported:
            self._reported.add(name)
            from skillhost import log

            log.warn(f"os.environ[{name!r}] {ENVIRON}; it reads as unset", at=at)
        return default

    def __setitem__(self, name: str, value: str) -> None:
        self._values[name] = value

    def __delitem__(self, name: str) -> None:
        # componentize-py clears the build's environment through here before the snapshot.
        found = self._values.pop(name, None) is not None
        if name in self.base:
            del self.base[name]
            found = True
        if not found:
            raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def copy(self) -> Dict[str, str]:
        """A plain dict of the variables, as ``os.environ.copy()`` gives."""
        return self._all()


environ = Environ()

# Imported while the component is built, so that a skill importing one inside a function
# finds it (nothing can be loaded later: the sandbox has no files).
COMMON_MODULES = (
    "base64", "bisect", "calendar", "collections", "contextlib", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "email.utils", "encodings.idna", "enum", "fnmatch", "fractions",
    "functools", "hashlib", "heapq", "hmac", "html", "http", "io", "ipaddress", "itertools", "json",
    "logging", "math", "operator", "pathlib", "pprint", "random", "re", "secrets", "shlex",
    "statistics", "string", "struct", "textwrap", "time", "traceback", "typing", "unicodedata",
    "urllib.error", "urllib.parse", "urllib.request", "uuid", "zlib",
)


def install() -> None:
    """Installs every guard and imports the common modules; before ``tools.py`` is imported."""
    import _thread
    import importlib
    import socket
    import subprocess
    import threading

    threading.Thread.start = _guard("threading.Thread.start()", THREADS)
    _thread.start_new_thread = _guard("_thread.start_new_thread()", THREADS)
    if hasattr(_thread, "start_joinable_thread"):
        _thread.start_joinable_thread = _guard("_thread.start_joinable_thread()", THREADS)
    for name in ("run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"):
        setattr(subprocess, name, _guard(f"subprocess.{name}()", PROCESSES))
    subprocess.Popen.__init__ = _guard("subprocess.Popen()", PROCESSES)
    os.system = _guard("os.system()", PROCESSES)
    os.popen = _guard("os.popen()", PROCESSES)
    socket.socket.__init__ = _guard("socket.socket()", SOCKETS)
    for name in ("create_connection", "create_server", "getaddrinfo", "gethostbyname", "gethostbyname_ex"):
        setattr(socket, name, _guard(f"socket.{name}()", SOCKETS))
    environ.base = os.environ
    os.environ = environ
    for module in COMMON_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    from . import _net

    _net.install()

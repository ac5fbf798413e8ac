"""The one exception the host-import wrappers raise."""


class HostError(Exception):
    """A host import failed.

    ``kind`` is the WIT error case in snake_case (``denied``, ``invalid_path``,
    ``too_large``, ``timeout``, ``unknown_server``, ...); ``detail`` its text, if any.
    """

    def __init__(self, interface: str, kind: str, detail: str = ""):
        self.interface = interface
        self.kind = kind
        self.detail = detail
        super().__init__(f"{interface}: {kind}" + (f": {detail}" if detail else ""))


def _snake(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i:
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def call(interface: str, fn, *args):
    """Runs a generated import function, turning its ``Err`` into :class:`HostError`."""
    from componentize_py_types import Err

    try:
        return fn(*args)
    except Err as err:
        value = err.value
        kind = _snake(type(value).__name__.split("_", 1)[-1])
        detail = getattr(value, "value", None)
        raise HostError(interface, kind, "" if detail is None else str(detail)) from None

"""``urllib.request.urlopen`` over the host's ``http`` import.

A skill has no sockets; the host sends the request, to hosts that the skill's ``skill.toml``
asks for and the operator grants. Responses outside 2xx raise ``urllib.error.HTTPError`` and
requests that get no response raise ``urllib.error.URLError`` (a timeout: ``TimeoutError``),
as ``urllib`` does. Redirects are the host's (never followed across hosts).
"""

import email.message
import io
import socket
import urllib.error
import urllib.request
from typing import Any, List, Optional, Tuple


class Response(io.BytesIO):
    """What ``urlopen`` returns: ``status``, ``reason``, ``headers``, ``read()``, a context manager."""

    def __init__(self, url: str, status: int, headers: List[Tuple[str, str]], body: bytes):
        super().__init__(body)
        self.url = url
        self.status = self.code = status
        self.reason = ""
        self.headers = self.msg = email.message.Message()
        for name, value in headers:
            self.headers[name] = value

    def getcode(self) -> int:
        """The status code."""
        return self.status

    def geturl(self) -> str:
        """The URL requested."""
        return self.url

    def info(self) -> email.message.Message:
        """The headers."""
        return self.headers

    def getheader(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """One header's value."""
        return self.headers.get(name, default)

    def getheaders(self) -> List[Tuple[str, str]]:
        """Every header."""
        return list(self.headers.items())


def urlopen(url: Any, data: Optional[bytes] = None, timeout: Any = socket._GLOBAL_DEFAULT_TIMEOUT, **_: Any):
    """Sends the request through the host and waits for the whole response."""
    from skillhost import HostError, http

    request = url if isinstance(url, urllib.request.Request) else urllib.request.Request(url, data)
    if data is not None:
        request.data = data
    timeout_ms = None if timeout in (None, socket._GLOBAL_DEFAULT_TIMEOUT) else max(1, int(timeout * 1000))
    headers = dict(request.header_items())
    try:
        got = http.fetch(request.get_method(), request.full_url, headers, request.data, timeout_ms)
    except HostError as err:
        if err.kind == "timeout":
            raise TimeoutError(f"{request.full_url}: timed out") from None
        raise urllib.error.URLError(f"{err.kind}: {err.detail}" if err.detail else err.kind) from None
    response = Response(request.full_url, got.status, got.headers, got.body)
    if not 200 <= got.status < 300:
        raise urllib.error.HTTPError(request.full_url, got.status, response.reason, response.headers, response)
    return response


def install() -> None:
    """Makes ``urllib.request.urlopen`` this one."""
    urllib.request.urlopen = urlopen

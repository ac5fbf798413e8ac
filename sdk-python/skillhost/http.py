"""Outbound HTTP to hosts the manifest asks for and the operator grants.

``http.get(url)`` / ``http.post(url, json=...)`` / ``http.fetch(method, url, ...)`` return a
:class:`Response`; a request that gets no response raises :class:`skillhost.HostError`
(``denied``, ``invalid_url``, ``timeout``, ``connection``, ``too_large``).
"""

import json as _json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

from ._errors import call


@dataclass
class Response:
    """A response received."""

    status: int
    headers: List[Tuple[str, str]]
    body: bytes

    def header(self, name: str) -> Optional[str]:
        """The first header called ``name`` (case-insensitive)."""
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def text(self) -> str:
        """The body decoded as UTF-8 (invalid bytes replaced)."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body decoded as JSON."""
        return _json.loads(self.body)


def fetch(
    method: str,
    url: str,
    headers: Optional[Dict[str, str]] = None,
    body: Union[bytes, str, None] = None,
    timeout_ms: Optional[int] = None,
) -> Response:
    """Sends a request and waits for the whole response."""
    from wit_world.imports import http as raw

    data = body.encode() if isinstance(body, str) else body
    request = raw.Request(method, url, list((headers or {}).items()), data, timeout_ms)
    response = call("http", raw.fetch, request)
    return Response(response.status, list(response.headers), bytes(response.body))


def get(url: str, **kwargs: Any) -> Response:
    """A GET request."""
    return fetch("GET", url, **kwargs)


def post(url: str, json: Any = None, **kwargs: Any) -> Response:
    """A POST request; ``json=`` encodes the body and sets its content type."""
    if json is not None:
        kwargs["body"] = _json.dumps(json)
        kwargs["headers"] = {"content-type": "application/json", **kwargs.get("headers", {})}
    return fetch("POST", url, **kwargs)

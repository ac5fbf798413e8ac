"""Asking whoever drives the call, mid-call, in one round: named requests under your own keys,
each answered (or found unavailable) under the same key::

    from skillhost import ask
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    answers = ask.ask({"user_name": ask.form("What is your name?", schema)})
    if answers["user_name"]["kind"] == "form" and answers["user_name"]["action"] == "accept":
        name = answers["user_name"]["content"]["name"]

An MCP client gets the requests as they are (``elicitation/create``, ``sampling/createMessage``,
``roots/list``); a person in chat or the API is asked each form; a turn's own model answers
sampling; ``skillhost call`` asks a form on the terminal. A request nobody there can answer
comes back ``{"kind": "unavailable", "why": ...}``.

From MCP 2026-07-28 a call that asks runs again from the start once the client answered, and
``ask`` then returns the recorded answers: whatever the tool did before asking happens again,
so do side effects after the question. Failures (``timed_out``, ``cancelled``, ``invalid``)
raise :class:`skillhost.HostError`."""

import json
from typing import Any, Dict, List, Optional, Tuple

from ._errors import call


def form(message: str, schema: Dict[str, Any]) -> Dict[str, Any]:
    """A form: ``message``, answered to fit ``schema`` (an object schema, passed on untouched)."""
    return {"form": {"message": message, "schema": schema}}


def sampling(
    prompt: str,
    max_tokens: int = 100,
    system_prompt: Optional[str] = None,
    messages: Optional[List[Tuple[str, str]]] = None,
) -> Dict[str, Any]:
    """Sampling of ``prompt`` (or of ``messages``: ``(role, text)`` pairs, role ``user`` or
    ``assistant``) by the model of whoever drives the call."""
    said = messages if messages is not None else [("user", prompt)]
    return {"sampling": {"messages": said, "system_prompt": system_prompt, "max_tokens": max_tokens}}


def roots() -> Dict[str, Any]:
    """The MCP client's roots."""
    return {"roots": {}}


def _request(raw, request: Dict[str, Any]):
    if "form" in request:
        f = request["form"]
        return raw.Request_Form(raw.Form(message=f["message"], schema=json.dumps(f["schema"])))
    if "sampling" in request:
        s = request["sampling"]
        role = {"user": raw.Role.USER, "assistant": raw.Role.ASSISTANT}
        said = [raw.Message(role=role[r], text=t) for r, t in s["messages"]]
        return raw.Request_Sampling(
            raw.Sampling(messages=said, system_prompt=s.get("system_prompt"), max_tokens=int(s["max_tokens"]))
        )
    if "roots" in request:
        return raw.Request_Roots()
    raise ValueError(f"not a request: {request!r} (use ask.form, ask.sampling or ask.roots)")


def _answer(raw, answer) -> Dict[str, Any]:
    if isinstance(answer, raw.Answer_Form):
        action = {raw.Action.ACCEPT: "accept", raw.Action.DECLINE: "decline", raw.Action.CANCEL: "cancel"}
        content = answer.value.content
        return {
            "kind": "form",
            "action": action[answer.value.action],
            "content": None if content is None else json.loads(content),
        }
    if isinstance(answer, raw.Answer_Sampled):
        s = answer.value
        return {"kind": "sampled", "text": s.text, "model": s.model, "stop_reason": s.stop_reason}
    if isinstance(answer, raw.Answer_Roots):
        return {"kind": "roots", "roots": [{"uri": r.uri, "name": r.name} for r in answer.value]}
    return {"kind": "unavailable", "why": answer.value}


def ask(requests: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Asks every request of ``requests`` (key -> :func:`form`, :func:`sampling` or
    :func:`roots`) in one round; the answers by key, each with its ``kind``."""
    from wit_world.imports import ask as raw

    asked = [(key, _request(raw, request)) for key, request in requests.items()]
    answers = call("ask", raw.ask, asked)
    return {key: _answer(raw, answer) for key, answer in answers}

"""reference_python: the official MCP conformance suite's reference tools that sample and
elicit mid-call, written on the skillhost Python SDK (`skillhost.ask`) and built by
`skillhost skill build tests/conformance/skills/reference_python` with componentize-py.

- `test_sampling(prompt)`: the client's model completes `prompt` (at most 100 tokens).
- `test_elicitation(message)`: a form of one required string, `response`.
- `test_elicitation_sep1034_defaults`: a form whose five fields have defaults (SEP-1034).
- `test_elicitation_sep1330_enums`: a form with every enum shape of SEP-1330.

The skill only asks; the host decides how the question travels (on the session up to
2025-11-25, in an `input_required` result from 2026-07-28). Nothing in the host knows these
names.
"""

import json

from skillhost import HostError, ask, tool


def _described(answer: dict) -> str:
    """A form's answer as the reference tools print it."""
    if answer.get("kind") == "form":
        return f"action={answer['action']}, content={json.dumps(answer.get('content'))}"
    return f"action=unavailable ({answer.get('why', answer.get('kind'))})"


def _form(message: str, schema: dict) -> str:
    try:
        return _described(ask.ask({"form": ask.form(message, schema)})["form"])
    except HostError as e:
        return f"action=none ({e.kind})"


@tool()
def test_sampling(prompt: str) -> str:
    """Tests server-initiated sampling (LLM completion request).

    Args:
        prompt: The prompt to send to the LLM.
    """
    try:
        answer = ask.ask({"sample": ask.sampling(prompt, max_tokens=100)})["sample"]
    except HostError as e:
        return f"LLM response: none ({e.kind})"
    if answer["kind"] == "sampled":
        return f"LLM response: {answer['text']}"
    return f"LLM response: none ({answer.get('why')})"


@tool()
def test_elicitation(message: str) -> str:
    """Tests server-initiated elicitation (user input request).

    Args:
        message: The message to show the user.
    """
    schema = {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]}
    return f"User response: {_form(message, schema)}"


@tool()
def test_elicitation_sep1034_defaults() -> str:
    """Tests elicitation with default values per SEP-1034."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    return f"Elicitation completed: {_form('Please review and update the form fields with defaults', schema)}"


def _choices(values, titles):
    return [{"const": v, "title": t} for v, t in zip(values, titles)]


@tool()
def test_elicitation_sep1330_enums() -> str:
    """Tests elicitation with enum schema improvements per SEP-1330."""
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Choose an option", "enum": options},
            "titledSingle": {
                "type": "string",
                "description": "Choose a titled option",
                "oneOf": _choices(["value1", "value2", "value3"], ["First Option", "Second Option", "Third Option"]),
            },
            "legacyEnum": {
                "type": "string",
                "description": "Choose a legacy option",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Choose multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": options},
            },
            "titledMulti": {
                "type": "array",
                "description": "Choose multiple titled options",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "anyOf": _choices(["value1", "value2", "value3"], ["First Choice", "Second Choice", "Third Choice"])
                },
            },
        },
        "required": [],
    }
    return f"Elicitation completed: {_form('Please select options from the enum fields', schema)}"

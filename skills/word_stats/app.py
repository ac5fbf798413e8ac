"""word_stats: text statistics, a skill written in Python.

Built with componentize-py against the world in `wit/world.wit`, which includes
`skillhost:skill/skill@0.1.0` (the imports and the `tools` export) and adds one optional
hook, `tool-target`, to show that hooks work from Python too:

    componentize-py -d ../../wit -d wit -w skills:word-stats/word-stats componentize app -o skill.wasm

componentize-py generates the `wit_world` bindings package at build time; nothing generated
is committed.
"""

import json
import re
from collections import Counter
from typing import List, Optional

from wit_world import exports
from wit_world.imports import log
from wit_world.imports.types import (
    Approval,
    CallContext,
    SkillInfo,
    Target,
    ToolDef,
    ToolResult,
)

WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
DEFAULT_TOP = 10

COUNT_WORDS_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The text to analyse."},
        "top": {
            "type": "integer",
            "minimum": 0,
            "maximum": 100,
            "description": f"How many of the most frequent words to list. Default: {DEFAULT_TOP}.",
        },
        "source": {
            "type": "string",
            "description": "Where the text comes from (a file name or title), if known.",
        },
    },
    "required": ["text"],
}


def count_words(text: str, top: int) -> dict:
    """Counts words (case-insensitive), lines and characters, and the `top` commonest words."""
    words = [w.lower() for w in WORD.findall(text)]
    ranked = sorted(Counter(words).items(), key=lambda item: (-item[1], item[0]))
    return {
        "words": len(words),
        "unique_words": len(set(words)),
        "lines": len(text.splitlines()),
        "chars": len(text),
        "top": [{"word": word, "count": count} for word, count in ranked[:top]],
    }


def result(content: dict, succeeded: bool) -> ToolResult:
    return ToolResult(content=json.dumps(content), succeeded=succeeded, is_empty=None, coverage=None)


class Tools(exports.Tools):
    def list_tools(self) -> List[ToolDef]:
        return [
            ToolDef(
                name="count_words",
                description="Count the words, lines and characters of a text and list its most frequent words.",
                input_schema=json.dumps(COUNT_WORDS_SCHEMA),
                approval=Approval.NONE,
                expose_result=True,
                declares_coverage=False,
            )
        ]

    def handle(self, name: str, input: str, ctx: CallContext) -> ToolResult:
        if name != "count_words":
            return result({"error": f"unknown tool: {name}"}, succeeded=False)
        args = json.loads(input)
        stats = count_words(args["text"], int(args.get("top", DEFAULT_TOP)))
        log.log(log.Level.DEBUG, "counted words", [("words", str(stats["words"]))])
        return result(stats, succeeded=True)

    def info(self) -> SkillInfo:
        return SkillInfo(mcp_tools=[], mcp_servers=[], mcp_prerequisites=[], verify=False)


class ToolTarget(exports.ToolTarget):
    def tool_target(self, tool_name: str, tool_input: str) -> Optional[Target]:
        source = json.loads(tool_input).get("source")
        return Target(target=source, query_kind="text_stats")

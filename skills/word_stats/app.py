"""word_stats: text statistics, a skill written on the skillhost Python SDK.

`skillhost skill build skills/word_stats` bundles the SDK (`sdk-python/`) and builds the
component with componentize-py. The tool's input schema comes from the type hints below,
its descriptions from the docstring; the `tool_target` function is the optional hook of
that name (the build exports exactly the hooks the module defines).
"""

import re
from collections import Counter
from typing import Annotated, Optional

from skillhost import Param, Target, log, tool

WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
DEFAULT_TOP = 10


def stats(text: str, top: int) -> dict:
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


@tool(expose_result=True)
def count_words(
    text: str,
    top: Annotated[int, Param(minimum=0, maximum=100)] = DEFAULT_TOP,
    source: Optional[str] = None,
) -> dict:
    """Count the words, lines and characters of a text and list its most frequent words.

    Args:
        text: The text to analyse.
        top: How many of the most frequent words to list. Default: 10.
        source: Where the text comes from (a file name or title), if known.
    """
    result = stats(text, top)
    log.debug("counted words", words=result["words"])
    return result


def tool_target(tool_name: str, tool_input: dict) -> Optional[Target]:
    """The text's source, for API stream consumers."""
    return Target(target=tool_input.get("source"), query_kind="text_stats")

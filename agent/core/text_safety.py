"""Text that cannot be encoded: lone surrogates become U+FFFD before they reach a tool, a file or a terminal.

Python strings can hold surrogate code points that UTF-8 cannot encode: a model's JSON `"\\ud800"`,
argv or file names undecodable in the locale (surrogateescape). Writing one raises UnicodeEncodeError
far from its cause, so text is scrubbed where it enters the session.
"""
from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def scrub(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (dict keys and nested lists included) replaced."""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value

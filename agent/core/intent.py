"""What a user's request asks for, where the harness must decide without the model: a destructive
rewrite of a file (Write may drop most of it), or delegation to a subagent."""
from __future__ import annotations

import re

_REWRITE = re.compile(r"\b(replace|rewrite|re-write|overwrite|clear|empty|truncate|reset|wipe|start over|from scratch)\b",
                      re.IGNORECASE)
_DELEGATION = re.compile(r"\b(sub-?agents?|delegat\w*|Task tool)\b", re.IGNORECASE)


def asks_to_rewrite(request: str) -> bool:
    """The request allows a Write that keeps little of an existing file ("replace big.py", "clear the log")."""
    return bool(_REWRITE.search(request))


def asks_to_delegate(request: str) -> bool:
    return bool(_DELEGATION.search(request))

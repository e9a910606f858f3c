"""A skill's or command's `allowed-tools` grant nothing unasked once its file changed during the session.

Otherwise a model in acceptEdits (or with a Bash rule that writes files) could add `allowed-tools: Bash`
to a project SKILL.md, load the skill and run anything. The session takes each file's digest when it
discovers skills and commands; a file whose text differs now (or that did not exist then) needs the
user's approval for its grants: the TUI asks, headless refuses and says so in the result.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable


class Baseline:
    """Digests of skill and command files as the session found them."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.digests = {Path(p).resolve(): _digest(Path(p)) for p in paths}

    def changed(self, path: Path) -> bool:
        return self.digests.get(Path(path).resolve()) != _digest(Path(path))


def approved_rules(agent: Any, baseline: Baseline | None, path: Path | None, rules: list[str] | None,
                   what: str) -> tuple[list[str], str]:
    """(the rules to grant, a note for the model when they were withheld)."""
    if not rules or baseline is None or path is None or not baseline.changed(path):
        return list(rules or []), ""
    reason = (f"{what} was changed during this session ({path}); its allowed-tools ({', '.join(rules)}) would "
              "run without asking")
    approver = getattr(agent, "approver", None)
    approval = approver("Skill", {"skill": what, "allowed_tools": list(rules)}, reason) if approver else None
    if approval is not None and approval.allow:
        return list(rules), ""
    return [], (f"[The allowed-tools of {what} ({', '.join(rules)}) were not granted: {path} changed during this "
                "session and the user has not approved them. Its tools ask as usual.]")


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None

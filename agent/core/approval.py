"""What a client is asked when a tool call needs approval, its answer, and the diff it is shown."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path


@dataclass
class PermissionRequest:
    tool_name: str
    tool_input: dict
    reason: str  # why it needs approval, from the permission check or a hook
    rules: list[str]  # what "always allow" would store; [] when nothing safe can be suggested
    preview: str | None = None  # Edit/Write/MultiEdit: the change as a unified diff


@dataclass
class PermissionAnswer:
    choice: str  # "once" | "always" | "deny"
    feedback: str = ""  # deny: told to the model

    def __post_init__(self) -> None:
        assert self.choice in ("once", "always", "deny"), self.choice


def preview_diff(name: str, args: dict, target: Path) -> str | None:
    """What an Edit/Write/MultiEdit call on `target` would change, as a unified diff (None for other tools).

    Edits are applied to the file's current text in memory, so the diff shows whole lines with
    their real numbers; an edit that would not apply shows its old/new strings instead.
    """
    if name not in ("Write", "Edit", "MultiEdit"):
        return None
    path = str(args.get("file_path", ""))
    try:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
    except (OSError, UnicodeDecodeError):
        current = ""
    if name == "Write":
        pairs = [(current, str(args.get("content", "")))]
    else:
        edits = [args] if name == "Edit" else [e for e in args.get("edits") or [] if isinstance(e, dict)]
        after = current
        for e in edits:
            old, new = str(e.get("old_string", "")), str(e.get("new_string", ""))
            if not old or old not in after:
                after = None
                break
            after = after.replace(old, new, -1 if e.get("replace_all") else 1)
        pairs = [(current, after)] if after is not None else \
            [(str(e.get("old_string", "")), str(e.get("new_string", ""))) for e in edits]
    out = []
    for old, new in pairs:
        for line in difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                         fromfile=f"a/{path}", tofile=f"b/{path}", n=2):
            out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out)

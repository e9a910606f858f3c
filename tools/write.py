"""Write: create a file or overwrite one the agent has read; atomic, mode, owner and line endings kept.

Refused: content that would stop a parsing file from parsing (tools/_parse_guard.py), and an overwrite that
keeps under half of a file's lines unless ToolContext.allow_shrink (a small model once replaced a 5-line
config.json with `debug: false`). A line changed in place (a renamed name) counts as kept: a rename of a
parameter used on most lines of a short function is not data lost.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import ClassVar

from tools._args import check_args
from tools._files import atomic_write, display_path, is_crlf, read_only_error, read_text, remember, unified_diff
from tools._parse_guard import parse_problem
from tools.read import unread_refusal
from tools.base import ToolContext, ToolResult

SHRINK_MIN_LINES = 5  # smaller files are rewritten whole often enough
LOST_LINES_SHOWN = 10
SIMILAR = 0.6  # token-level likeness at which a line counts as changed, not lost
SIMILAR_PAIRS_MAX = 40_000  # beyond this many comparisons unmatched lines count as lost (a rewrite, not an edit)
TOKEN = re.compile(r"\w+|[^\w\s]")


@dataclass
class WriteTool:
    name: ClassVar[str] = "Write"
    read_only: ClassVar[bool] = False
    description: ClassVar[str] = (
        "Create a file with the given content, or overwrite a file you have Read. "
        "Missing parent directories are created. To change part of a file, use Edit.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file"},
            "content": {"type": "string", "description": "The whole content of the file"},
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        path = ctx.resolve(args["file_path"])
        shown = display_path(ctx, path)
        content: str = args["content"]
        if path.is_dir():
            return ToolResult(f"{shown} is a directory; give a file path.", is_error=True)
        created = not path.exists()
        old = ""
        try:
            if not created:
                locked = read_only_error(ctx, path)
                if locked:
                    return ToolResult(locked, is_error=True)
                refusal = unread_refusal(ctx, path)
                if refusal:
                    return refusal
                old = read_text(path) or ""
                if is_crlf(old) and "\r" not in content:
                    content = content.replace("\n", "\r\n")  # keep a Windows file Windows
                lost = None if ctx.allow_shrink else shrink_refusal(old, content)
                if lost:
                    return ToolResult(f"{shown} was not changed: {lost}", is_error=True)
            problem = parse_problem(path, None if created else old, content)
            if problem:
                now = "the content is" if created else "the new content is"
                return ToolResult(f"{shown} was not {'created' if created else 'changed'}: {now} {problem.reason}. "
                                  f"It reads:\n{problem.region}", is_error=True)
            atomic_write(path, content.encode("utf-8"))
            remember(ctx, path)
        except OSError as e:
            return ToolResult(f"Cannot write {shown}: {e.strerror or e}.", is_error=True)
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "Created" if created else "Overwrote"
        return ToolResult(f"{verb} {shown} ({lines} line{'s' * (lines != 1)}).",
                          data={"file_path": str(path), "created": created, "diff": unified_diff(old, content, shown)})


def shrink_refusal(old: str, new: str) -> str | None:
    """Why `new` would lose most of `old` (kept: old's non-blank lines found in `new`, whitespace aside); None if not."""
    rows = [(n, line) for n, line in enumerate(old.replace("\r\n", "\n").split("\n"), start=1) if line.strip()]
    if len(rows) < SHRINK_MIN_LINES:
        return None
    available = Counter(line.strip() for line in new.split("\n") if line.strip())
    unmatched = []
    for n, line in rows:
        if available[line.strip()]:
            available[line.strip()] -= 1
        else:
            unmatched.append((n, line))
    lost = [f"{n:>6}\t{line}" for n, line in _unchanged_in_place(unmatched, list(available.elements()))]
    kept = len(rows) - len(lost)
    if 2 * kept >= len(rows):
        return None
    more = f"\n[... and {len(lost) - LOST_LINES_SHOWN} more]" if len(lost) > LOST_LINES_SHOWN else ""
    return (f"Write replaces the whole file, and your content keeps {kept} of its {len(rows)} lines. These would be "
            f"lost:\n{chr(10).join(lost[:LOST_LINES_SHOWN])}{more}\nTo change part of the file, use Edit with "
            "old_string copied from it.")


def _unchanged_in_place(unmatched: list[tuple[int, str]], spare: list[str]) -> list[tuple[int, str]]:
    """The old lines no spare new line is a changed copy of (most tokens alike), each new line used once."""
    if len(unmatched) * len(spare) > SIMILAR_PAIRS_MAX:
        return unmatched
    spare_tokens = [TOKEN.findall(line) for line in spare]
    lost = []
    for n, line in unmatched:
        matcher = SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(TOKEN.findall(line))
        best, best_ratio = -1, SIMILAR
        for i, tokens in enumerate(spare_tokens):
            if tokens is None:
                continue
            matcher.set_seq1(tokens)
            if matcher.real_quick_ratio() >= best_ratio and matcher.quick_ratio() >= best_ratio \
                    and (ratio := matcher.ratio()) >= best_ratio:
                best, best_ratio = i, ratio
        if best < 0:
            lost.append((n, line))
        else:
            spare_tokens[best] = None
    return lost

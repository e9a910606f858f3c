"""Edit: replacement of old_string in a file the agent has read; errors say how to fix the call.

old_string is found exactly, else without Read's gutters or ignoring whitespace when that is unique
(tools/_match.py); an edit that would stop a parsing file from parsing is refused (tools/_parse_guard.py).

`edit_file` is shared with MultiEdit: it applies a list of edits to the text in memory and writes
once, so a failing edit leaves the file untouched.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import ClassVar

from tools._args import check_args
from tools._files import (atomic_write, display_path, is_crlf, missing_error, numbered, read_only_error, read_text,
                          remember, unified_diff)
from tools._match import EditError, Match, Span, find
from tools._parse_guard import parse_problem
from tools.read import unread_refusal
from tools.base import ToolContext, ToolResult

CONTEXT_LINES = 2  # lines shown around each changed region in the result
MAX_SHOWN_LINES = 40
_LOOSENESS = {"exact": 0, "gutter": 1, "whitespace": 2}


def apply_edit(text: str, old: str, new: str, replace_all: bool = False) -> tuple[str, Match]:
    """(new text, where old_string matched); raises EditError with an actionable message."""
    if old == "" and old != new:
        if text == "":
            return new, Match("exact", (Span(0, 0, new, 1, 1),))
        raise EditError("old_string is empty, but the file is not; give the exact text to replace "
                        "(use Write to replace the whole file).")
    match = find(text, old, new, replace_all)
    return match.apply(text), match


def changed_regions(old: str, new: str) -> str:
    """The changed lines of `new` with a little context, numbered like Read."""
    a, b = old.split("\n"), new.split("\n")
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    spans = []  # (first, last) 0-based line indices in `new`
    opcodes = difflib.SequenceMatcher(None, a[head:len(a) - tail], b[head:len(b) - tail]).get_opcodes()
    for tag, _, _, j1, j2 in opcodes:
        if tag != "equal":
            lo, hi = head + j1 - CONTEXT_LINES, head + max(j2, j1 + 1) - 1 + CONTEXT_LINES
            if spans and lo <= spans[-1][1] + 1:
                spans[-1] = (spans[-1][0], hi)
            else:
                spans.append((lo, hi))
    parts, shown = [], 0
    for lo, hi in spans:
        lo, hi = max(lo, 0), min(hi, len(b) - 1)
        if shown + hi - lo + 1 > MAX_SHOWN_LINES:
            parts.append("[... more changes; Read the file to see them]")
            break
        parts.append(numbered(b[lo:hi + 1], lo + 1))
        shown += hi - lo + 1
    return "\n...\n".join(parts)


def edit_file(ctx: ToolContext, file_path: str, edits: list[dict]) -> ToolResult:
    """Apply edits in order to the file's text and write once; all or nothing."""
    path = ctx.resolve(file_path)
    shown = display_path(ctx, path)
    if path.is_dir():
        return ToolResult(f"{shown} is a directory, not a file.", is_error=True)
    exists = path.exists()
    if not exists and edits[0].get("old_string") != "":
        return ToolResult(missing_error(ctx, path) + " To create a file use Write.", is_error=True)
    try:
        if exists:
            locked = read_only_error(ctx, path)
            if locked:
                return ToolResult(locked, is_error=True)
            refusal = unread_refusal(ctx, path)
            if refusal:
                return refusal
            original = read_text(path)
            if original is None:
                return ToolResult(f"{shown} is not a UTF-8 text file; Edit works on text files only.", is_error=True)
        else:
            original = ""
        crlf = is_crlf(original)
        # CRLF files are edited as LF (what the model sees and writes) and written back as CRLF.
        text = original.replace("\r\n", "\n") if crlf else original
        replacements, notes, loosest = 0, [], "exact"
        for n, edit in enumerate(edits, start=1):
            old, new = edit["old_string"], edit["new_string"]
            if crlf:
                old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
            try:
                text, match = apply_edit(text, old, new, bool(edit.get("replace_all", False)))
            except EditError as e:
                if len(edits) > 1:
                    return ToolResult(f"Edit {n} of {len(edits)} failed, so no edit was written: {e}", is_error=True)
                return ToolResult(f"{shown}: {e}", is_error=True)
            replacements += len(match.spans)
            if match.kind != "exact":
                notes.append(f"edit {n} {match.note()}" if len(edits) > 1 else match.note())
                loosest = max(loosest, match.kind, key=_LOOSENESS.get)
        before = original.replace("\r\n", "\n") if crlf else original
        problem = parse_problem(path, before if exists else None, text)
        if problem:
            return ToolResult(f"{shown} was not {'changed' if exists else 'created'}: the edit would make it "
                              f"{problem.reason}. The result would read:\n{problem.region}", is_error=True)
        regions = changed_regions(before, text)
        final = text.replace("\n", "\r\n") if crlf else text
        atomic_write(path, final.encode("utf-8"))
        remember(ctx, path)
    except OSError as e:
        return ToolResult(f"Cannot edit {shown}: {e.strerror or e}.", is_error=True)
    what = f"{len(edits)} edits" if len(edits) > 1 else f"{replacements} replacement{'s' * (replacements != 1)}"
    verb = "Edited" if exists else "Created"
    what += "".join(f"; {note}" for note in notes)
    return ToolResult(f"{verb} {shown} ({what}). Changed lines now read:\n{regions}",
                      data={"file_path": str(path), "replacements": replacements, "match": loosest,
                            "diff": unified_diff(original, final, shown)})


@dataclass
class EditTool:
    name: ClassVar[str] = "Edit"
    read_only: ClassVar[bool] = False
    description: ClassVar[str] = (
        "Change a file you have Read: replace old_string with new_string. Copy old_string exactly from the file "
        "(same indentation, without Read's line numbers). It must occur once: include nearby lines to make it "
        "unique, or set replace_all to change every occurrence.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file"},
            "old_string": {"type": "string", "description": "Text copied exactly from the file"},
            "new_string": {"type": "string", "description": "The text that replaces it"},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence"},
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        return edit_file(ctx, args["file_path"], [args])

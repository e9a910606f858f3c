"""Edit: exact-substring replacement in a file the agent has read; errors say how to fix the call.

`edit_file` is shared with MultiEdit: it applies a list of edits to the text in memory and writes
once, so a failing edit leaves the file untouched.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import ClassVar

from tools._args import check_args
from tools._files import (atomic_write, display_path, is_crlf, missing_error, numbered, read_text, remember,
                          unified_diff)
from tools.read import unread_refusal
from tools.base import ToolContext, ToolResult

CONTEXT_LINES = 2  # lines shown around each changed region in the result
MAX_SHOWN_LINES = 40
_LINE_PREFIX = re.compile(r"^ *\d+\t")  # what Read puts before each line; models often copy it
_WORD = re.compile(r"\w+")


class EditError(Exception):
    """An edit that cannot be applied; the message is for the model."""


def apply_edit(text: str, old: str, new: str, replace_all: bool = False) -> tuple[str, int]:
    """(new text, number of replacements); raises EditError with an actionable message."""
    if old == new:
        raise EditError("old_string and new_string are identical; there is nothing to change.")
    if old == "":
        if text == "":
            return new, 1
        raise EditError("old_string is empty, but the file is not; give the exact text to replace "
                        "(use Write to replace the whole file).")
    count = text.count(old)
    if count == 0:
        raise EditError(_not_found(text, old))
    if count > 1 and not replace_all:
        starts, i = [], text.find(old)
        while i != -1:
            starts.append(text.count("\n", 0, i) + 1)
            i = text.find(old, i + len(old))
        raise EditError(f"old_string occurs {count} times (lines {', '.join(map(str, starts))}). Add surrounding "
                        "lines to old_string to make it unique, or set replace_all to true to change every occurrence.")
    return text.replace(old, new), count


def _not_found(text: str, old: str) -> str:
    """Name the closest window of lines, its line numbers and the likely cause."""
    message = "old_string was not found in the file."
    old_lines = old.strip("\n").split("\n")
    if all(_LINE_PREFIX.match(line) for line in old_lines if line):
        return message + (" It starts with line-number prefixes copied from Read (like '    12<tab>'); "
                          "remove them and keep only the file's text.")
    lines = text.split("\n")
    size = min(len(old_lines), len(lines))
    target = "\n".join(old_lines)
    best, best_at = 0.0, 0
    for i in _candidate_windows(lines, old_lines, size):
        # Mean similarity of aligned lines: a character-level diff of whole blocks is quadratic and takes
        # seconds on a few hundred lines.
        ratio = sum(_similarity(lines[i + k], old_lines[k]) for k in range(size)) / size
        if ratio > best:
            best, best_at = ratio, i
    if best < 0.5:
        return message + " No similar text either; Read the file to see its current content."
    window = lines[best_at:best_at + size]
    where = f"line {best_at + 1}" if size == 1 else f"lines {best_at + 1}-{best_at + size}"
    message += (f" The closest text is at {where} ({best:.0%} similar):\n"
                f"{numbered(window[:15], best_at + 1)}\n")
    if size > 15:
        message += f"[... {size - 15} more lines]\n"
    if " ".join("\n".join(window).split()) == " ".join(target.split()):
        message += "It differs only in whitespace or indentation. "
    return message + "Copy the text exactly as the file has it (without Read's line-number prefix)."


def _candidate_windows(lines: list[str], old_lines: list[str], size: int, keep: int = 20) -> list[int]:
    """Window starts worth comparing line by line: all of them in a small file, else those sharing the
    most words with old_string."""
    starts = range(len(lines) - size + 1)
    if len(starts) * size <= 5000:
        return list(starts)
    words = set(_WORD.findall("\n".join(old_lines)))
    per_line = [sum(w in words for w in _WORD.findall(line)) for line in lines]
    score = sum(per_line[:size])
    scores = [score]
    for i in range(1, len(starts)):  # sliding window sum
        score += per_line[i + size - 1] - per_line[i - 1]
        scores.append(score)
    return sorted(starts, key=lambda i: -scores[i])[:keep]


def _similarity(a: str, b: str) -> float:
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a[:300], b[:300], autojunk=False).ratio()


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
        replacements = 0
        for n, edit in enumerate(edits, start=1):
            old, new = edit["old_string"], edit["new_string"]
            if crlf:
                old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
            try:
                text, count = apply_edit(text, old, new, bool(edit.get("replace_all", False)))
            except EditError as e:
                if len(edits) > 1:
                    return ToolResult(f"Edit {n} of {len(edits)} failed, so no edit was written: {e}", is_error=True)
                return ToolResult(f"{shown}: {e}", is_error=True)
            replacements += count
        regions = changed_regions(original.replace("\r\n", "\n") if crlf else original, text)
        final = text.replace("\n", "\r\n") if crlf else text
        atomic_write(path, final.encode("utf-8"))
        remember(ctx, path)
    except OSError as e:
        return ToolResult(f"Cannot edit {shown}: {e.strerror or e}.", is_error=True)
    what = f"{len(edits)} edits" if len(edits) > 1 else f"{replacements} replacement{'s' * (replacements != 1)}"
    verb = "Edited" if exists else "Created"
    return ToolResult(f"{verb} {shown} ({what}). Changed lines now read:\n{regions}",
                      data={"file_path": str(path), "replacements": replacements,
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

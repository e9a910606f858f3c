"""Read: a file as `cat -n` numbered lines, a window of it for long files; binaries described."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tools._args import check_args
from tools._files import IMAGE_SUFFIXES, display_path, freshness_error, image_size, missing_error, remember, sniff
from tools.base import ToolContext, ToolResult


@dataclass
class ReadTool:
    max_lines: int = 2000  # default limit
    max_line_chars: int = 2000
    max_chars: int = 60_000  # whole-result cap, so one Read cannot flood a small context window

    name: ClassVar[str] = "Read"
    read_only: ClassVar[bool] = True
    description: ClassVar[str] = (
        "Read a text file. Its lines come numbered like `cat -n`; the numbers are not part of the file. "
        "Reads up to 2000 lines; for another part of a long file pass offset (first line, 1-based) and limit. "
        "Images and binary files are described, not shown.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file"},
            "offset": {"type": "integer", "minimum": 1, "description": "Line number to start at (1-based)"},
            "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to read"},
        },
        "required": ["file_path"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        path = ctx.resolve(args["file_path"])
        shown = display_path(ctx, path)
        if path.is_dir():
            return ToolResult(directory_error(path, shown), is_error=True)
        if not path.exists():
            return ToolResult(missing_error(ctx, path), is_error=True)
        if not path.is_file():  # a FIFO or device would block or never end
            return ToolResult(f"{shown} is not a regular file (a pipe, socket or device); it cannot be read.",
                              is_error=True)
        try:
            remember(ctx, path)  # stat before reading: a change during the read shows up as stale later
            with path.open("rb") as f:
                head = f.read(8192)
            kind = sniff(head)
            if kind is not None or path.suffix.lower() in IMAGE_SUFFIXES:
                return self._describe(path, shown, head, kind or "image")
            limit = args.get("limit", self.max_lines)
            if ctx.read_window is not None:
                # A small model's explicit limit is noise copied into the call (docs/EVALS.md): it gets the window.
                limit = ctx.read_window
            return self._read_lines(path, shown, args.get("offset", 1), limit)
        except OSError as e:
            return ToolResult(f"Cannot read {shown}: {e.strerror or e}.", is_error=True)

    def _describe(self, path, shown: str, head: bytes, kind: str) -> ToolResult:
        size = path.stat().st_size
        dims = image_size(head)
        text = f"{shown}: {kind}, {size} bytes" + (f", {dims[0]}x{dims[1]} pixels" if dims else "")
        text += ". Its contents are not shown as text."
        return ToolResult(text, data={"file_path": str(path), "kind": kind, "size": size})

    def _read_lines(self, path, shown: str, offset: int, limit: int) -> ToolResult:
        out: list[str] = []
        chars = 0
        total = 0
        long_lines = 0
        cut_by_chars = False
        # Streamed so a huge file costs one pass, not its size in memory; newline="" keeps "\r" to strip.
        with path.open("r", encoding="utf-8", errors="replace", newline="") as f:
            for total, line in enumerate(f, start=1):
                if total < offset or len(out) >= limit or cut_by_chars:
                    continue
                line = line.rstrip("\n").rstrip("\r")
                if len(line) > self.max_line_chars:
                    long_lines += 1
                    line = line[: self.max_line_chars] + f"... [line truncated, {len(line)} characters]"
                row = f"{total:>6}\t{line}"
                if out and chars + len(row) + 1 > self.max_chars:
                    cut_by_chars = True
                    continue
                out.append(row)
                chars += len(row) + 1
        data = {"file_path": str(path), "start_line": offset, "num_lines": len(out), "total_lines": total}
        if total == 0:
            return ToolResult(f"{shown} is empty.", data=data)
        if offset > total:
            return ToolResult(f"{shown} has {total} lines; offset {offset} is past the end.", is_error=True, data=data)
        notes = []
        last = offset + len(out) - 1
        if last < total:
            notes.append(f"[Showing lines {offset}-{last} of {total}. To read more, call Read with offset={last + 1} "
                         f"(and a limit), or use Grep to find the lines you need.]")
        if long_lines:
            notes.append(f"[{long_lines} line(s) longer than {self.max_line_chars} characters were truncated.]")
        return ToolResult("\n".join(out + notes), data=data)


def unread_refusal(ctx: ToolContext, path: Path) -> ToolResult | None:
    """Why Write/Edit/MultiEdit may not change the existing file `path` yet, as their result; None if they may.

    With ctx.read_window set, a text file never read comes back with its first window and counts as the Read
    (data "retry": an identical call may now succeed), since small models send a refused Write again as it was
    (docs/EVALS.md proposal 5).
    """
    error = freshness_error(ctx, path)
    if error is None:
        return None
    if ctx.read_window is None or str(path) in ctx.read_files:  # never read only; a stale read says so
        return ToolResult(error, is_error=True)
    with path.open("rb") as f:
        if sniff(f.read(8192)) is not None:
            return ToolResult(error, is_error=True)
    window = ReadTool().run({"file_path": str(path)}, ctx)  # remembers the file: this is the Read
    if window.is_error:
        return ToolResult(error, is_error=True)
    shown = display_path(ctx, path)
    return ToolResult(f"{shown} was not changed: you had not read it. Its content is below and now counts as "
                      f"your Read; if your change still fits it, make the call again.\n{window.content}",
                      is_error=True, data={"retry": True, "file_path": str(path)})


DIR_ENTRIES_SHOWN = 40


def directory_error(path, shown: str) -> str:
    """The error for Read on a directory, with what it holds, so the next call can name a file."""
    try:
        entries = sorted((e.name + ("/" if e.is_dir() else "") for e in os.scandir(path)), key=str.lower)
    except OSError:
        entries = []
    listing = ", ".join(entries[:DIR_ENTRIES_SHOWN]) or "nothing"
    more = f" and {len(entries) - DIR_ENTRIES_SHOWN} more" if len(entries) > DIR_ENTRIES_SHOWN else ""
    return f"{shown} is a directory, not a file. It contains: {listing}{more}. Read a file by its path."

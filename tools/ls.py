"""LS: a directory as an indented tree, filled breadth-first up to a cap so shallow entries come first."""
from __future__ import annotations

import fnmatch
import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tools._args import check_args
from tools._files import display_path, missing_error
from tools.base import ToolContext, ToolResult

INDENT = "  "


@dataclass
class LSTool:
    max_entries: int = 200
    skipped: tuple[str, ...] = (".git", "__pycache__", "node_modules")

    name: ClassVar[str] = "LS"
    read_only: ClassVar[bool] = True
    description: ClassVar[str] = (
        "List a directory as a tree (default: the project root). ignore takes glob patterns of names to leave "
        "out. .git, __pycache__ and node_modules are not listed.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Directory to list"},
            "ignore": {"type": "array", "items": {"type": "string"}, "description": "Glob patterns to leave out"},
        },
        "required": [],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        root = ctx.resolve(args.get("path", "."))
        if not root.exists():
            return ToolResult(missing_error(ctx, root, "Directory"), is_error=True)
        if not root.is_dir():
            return ToolResult(f"{display_path(ctx, root)} is a file, not a directory; use Read to see it.",
                              is_error=True)
        ignore = args.get("ignore", [])
        listed: dict[Path, list[os.DirEntry]] = {}  # directory -> its shown entries
        hidden: dict[Path, int] = {}  # directory -> entries left out for the cap
        count = 0
        queue = deque([root])
        while queue:
            directory = queue.popleft()
            try:
                entries = [e for e in os.scandir(directory) if not self._skip(e, root, ignore)]
            except OSError:
                if directory == root:
                    return ToolResult(f"Cannot list {display_path(ctx, root)}: permission denied.", is_error=True)
                hidden[directory] = -1  # unreadable
                continue
            entries.sort(key=lambda e: (not _is_dir(e), e.name))
            room = self.max_entries - count
            if len(entries) > room and directory != root:
                hidden[directory] = len(entries)  # a directory is listed whole or not at all
                continue
            listed[directory] = entries[:room]
            if len(entries) > room:
                hidden[directory] = len(entries) - room
            count += len(listed[directory])
            queue.extend(Path(e.path) for e in listed[directory] if _is_dir(e) and not e.is_symlink())
        rows = [f"{str(root).rstrip('/')}/"]
        self._render(root, listed, hidden, 1, rows)
        if hidden:
            rows.append(f"[Listing capped at {self.max_entries} entries; call LS on a directory marked "
                        "'not shown' to see it, or use Glob.]")
        return ToolResult("\n".join(rows), data={"num_entries": count, "truncated": bool(hidden)})

    def _skip(self, entry: os.DirEntry, root: Path, ignore: list[str]) -> bool:
        if entry.name in self.skipped:
            return True
        rel = Path(entry.path).relative_to(root).as_posix()
        return any(fnmatch.fnmatch(entry.name, pat) or fnmatch.fnmatch(rel, pat.rstrip("/")) for pat in ignore)

    def _render(self, directory: Path, listed: dict, hidden: dict, depth: int, rows: list[str]) -> None:
        for entry in listed.get(directory, []):
            path = Path(entry.path)
            if entry.is_symlink():
                rows.append(f"{INDENT * depth}{entry.name}{'/' if _is_dir(entry) else ''} -> {os.readlink(path)}")
            elif _is_dir(entry):
                note = ""
                if path not in listed and path in hidden:
                    note = " (unreadable)" if hidden[path] < 0 else f" ({hidden[path]} entries not shown)"
                rows.append(f"{INDENT * depth}{entry.name}/{note}")
                self._render(path, listed, hidden, depth + 1, rows)
            else:
                rows.append(f"{INDENT * depth}{entry.name}")
        if directory in listed and directory in hidden:
            rows.append(f"{INDENT * depth}... ({hidden[directory]} more entries not shown)")


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False

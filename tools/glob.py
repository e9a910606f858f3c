"""Glob: files whose path matches a pattern, newest first."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tools._args import check_args
from tools._files import display_path, missing_error
from tools._walk import compile_glob, walk_files
from tools.base import ToolContext, ToolResult

_MAGIC = set("*?[{")


@dataclass
class GlobTool:
    max_results: int = 200

    name: ClassVar[str] = "Glob"
    read_only: ClassVar[bool] = True
    description: ClassVar[str] = (
        "Find files whose path matches a glob pattern; newest first. * matches within one name, ** matches any "
        "number of directories. path is the directory to search (default: the project).")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern for file paths"},
            "path": {"type": "string", "description": "Directory to search (default: the project)"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        pattern = args["pattern"].strip()
        if not pattern:
            return ToolResult("pattern is empty; e.g. \"**/*.py\".", is_error=True)
        root = ctx.resolve(args.get("path", "."))
        # Literal leading segments ("src/" in "src/**/*.py", or an absolute prefix) move the root down,
        # so only that subtree is walked.
        parts = pattern.split("/")
        while len(parts) > 1 and not _MAGIC & set(parts[0]):
            head = parts.pop(0)
            root = root / head if head else Path("/")
        root = ctx.resolve(str(root))
        rest = "/".join(parts)
        if not root.is_dir():
            if root.exists():
                return ToolResult(f"{display_path(ctx, root)} is a file, not a directory.", is_error=True)
            return ToolResult(missing_error(ctx, root, "Directory"), is_error=True)
        matcher = compile_glob(rest)
        depth = None if "**" in rest else len(parts)
        found = []
        for path in walk_files(root, ctx.cwd.resolve(), max_depth=depth):
            if matcher.match(path.relative_to(root).as_posix()):
                try:
                    found.append((-path.stat().st_mtime_ns, path.parts, path))
                except OSError:
                    continue  # deleted while walking
        found.sort()
        data = {"num_files": len(found)}
        if not found:
            hint = f' To search subdirectories too, use "**/{rest}".' if depth == 1 else ""
            return ToolResult(f"No files match {pattern!r} (.git and .gitignore'd paths are not searched).{hint}",
                              data=data)
        rows = [display_path(ctx, p) for _, _, p in found[: self.max_results]]
        if len(found) > self.max_results:
            rows.append(f"[Showing the {self.max_results} most recently modified of {len(found)} files; "
                        "narrow the pattern or path.]")
        return ToolResult("\n".join(rows), data=data)

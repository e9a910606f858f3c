"""Grep: regex search over files with ripgrep (the `ripgrep` package's binary); a Python walk for what it refuses.

Both engines produce the same hits (file -> line number -> text, match or context) and one
renderer turns them into text, so the model sees the same output whichever ran. The Python engine
takes over for patterns ripgrep's regex syntax lacks (look-around, backreferences).
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tools._args import check_args
from tools._files import display_path, missing_error
from tools._walk import GlobFilter, compile_glob, walk_files
from tools.base import ToolContext, ToolResult

# File types, as globs on the file name; given to ripgrep with --type-add so both engines agree.
TYPES = {
    "py": ["*.py", "*.pyi"], "js": ["*.js", "*.jsx", "*.mjs", "*.cjs"], "ts": ["*.ts", "*.tsx", "*.mts", "*.cts"],
    "go": ["*.go"], "rust": ["*.rs"], "java": ["*.java"], "kotlin": ["*.kt", "*.kts"], "c": ["*.c", "*.h"],
    "cpp": ["*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.hxx", "*.h"], "cs": ["*.cs"], "ruby": ["*.rb"],
    "php": ["*.php"], "swift": ["*.swift"], "scala": ["*.scala"], "lua": ["*.lua"], "sh": ["*.sh", "*.bash", "*.zsh"],
    "md": ["*.md", "*.markdown"], "json": ["*.json", "*.jsonl"], "yaml": ["*.yaml", "*.yml"], "toml": ["*.toml"],
    "html": ["*.html", "*.htm"], "css": ["*.css", "*.scss"], "sql": ["*.sql"], "xml": ["*.xml"], "txt": ["*.txt"],
}
ALIASES = {"python": "py", "javascript": "js", "typescript": "ts", "rs": "rust", "markdown": "md", "rb": "ruby",
           "yml": "yaml", "c++": "cpp", "shell": "sh", "bash": "sh", "golang": "go"}

Hits = dict[Path, dict[int, tuple[str, bool]]]  # file -> line number -> (text, is a match; else context)


class GrepError(Exception):
    """A search that cannot run (bad regex, ripgrep failure); the message is for the model."""


@dataclass
class GrepTool:
    use_ripgrep: bool = True  # False forces the Python engine
    default_head_limit: int = 200  # entries shown when head_limit is not given
    max_line_chars: int = 500
    timeout_s: float = 60.0

    name: ClassVar[str] = "Grep"
    read_only: ClassVar[bool] = True
    description: ClassVar[str] = (
        "Search the contents of files for a regular expression. output_mode is files_with_matches (the default: "
        "paths of matching files), content (the matching lines with line numbers; -A/-B/-C add context lines) "
        "or count. Narrow the search with path, glob (file name pattern) or type (file type).")
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for"},
            "path": {"type": "string", "description": "File or directory to search (default: the project)"},
            "glob": {"type": "string", "description": "Search only files whose name matches this glob"},
            "type": {"type": "string", "description": "Search only files of this type: py, js, ts, go, rust, ..."},
            "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"]},
            "-i": {"type": "boolean", "description": "Ignore case"},
            "-n": {"type": "boolean", "description": "Line numbers in content mode (default true)"},
            "-A": {"type": "integer", "minimum": 0, "description": "Context lines after"},
            "-B": {"type": "integer", "minimum": 0, "description": "Context lines before"},
            "-C": {"type": "integer", "minimum": 0, "description": "Context lines around"},
            "head_limit": {"type": "integer", "minimum": 1, "description": "Show the first N entries"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        args, error = check_args(self.input_schema, args)
        if error:
            return ToolResult(error, is_error=True)
        root = ctx.resolve(args.get("path", "."))
        if not root.exists():
            return ToolResult(missing_error(ctx, root, "Path"), is_error=True)
        type_name = ALIASES.get(args.get("type", ""), args.get("type"))
        if type_name is not None and type_name not in TYPES:
            return ToolResult(f"Unknown type {args['type']!r}; known types: {', '.join(TYPES)}.", is_error=True)
        mode = args.get("output_mode", "files_with_matches")
        context = (args.get("-B", args.get("-C", 0)), args.get("-A", args.get("-C", 0))) if mode == "content" else (0, 0)
        search = _Search(args["pattern"], args.get("-i", False), context, args.get("glob"),
                         TYPES.get(type_name, []), root, ctx.cwd.resolve(), first_only=mode == "files_with_matches")
        rg = ripgrep_binary() if self.use_ripgrep else None
        try:
            hits, engine = (self._ripgrep(rg, search), "rg") if rg else (_python_search(search), "python")
        except GrepError as e:
            return ToolResult(str(e), is_error=True)
        except _FallBack:
            hits, engine = _python_search(search), "python"
        if ctx.read_denied is not None:  # files a Read deny rule covers are not shown, whatever the engine
            hits = {f: h for f, h in hits.items() if not ctx.read_denied(f)}
        return self._render(hits, mode, args, ctx, engine)

    def _ripgrep(self, rg: str, s: "_Search") -> Hits:
        cmd = [rg, "--json", "--hidden", "--no-require-git", "--no-config"]
        cmd += ["-i"] if s.ignore_case else []
        cmd += ["-B", str(s.context[0]), "-A", str(s.context[1])] if any(s.context) else []
        cmd += ["--max-count", "1"] if s.first_only else []
        for g in s.type_globs:
            cmd += ["--type-add", f"agent:{g}"]
        cmd += ["--type", "agent"] if s.type_globs else []
        cmd += ["--glob", s.glob] if s.glob else []
        cmd += ["--glob", "!.git", "-e", s.pattern, "--"]
        # Run from the search root: ripgrep matches --glob against paths relative to its cwd.
        cwd, target = (s.root.parent, s.root.name) if s.root.is_file() else (s.root, ".")
        try:
            proc = subprocess.run(cmd + [target], cwd=cwd, capture_output=True, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise GrepError(f"Grep timed out after {self.timeout_s:g}s; narrow it with path, glob or type.")
        stderr = proc.stderr.decode("utf-8", errors="replace").strip()
        if proc.returncode == 2 and ("regex" in stderr or "error parsing" in stderr):
            try:  # look-around and backreferences: ripgrep refuses them, Python's re does not
                re.compile(s.pattern)
            except re.error:
                raise GrepError(f"Invalid regular expression: {stderr}")
            raise _FallBack()
        hits: Hits = {}
        for line in proc.stdout.splitlines():
            event = json.loads(line)
            if event["type"] not in ("match", "context"):
                continue
            data = event["data"]
            path = Path(os.path.normpath(cwd / _text(data["path"])))
            text = _text(data["lines"]).removesuffix("\n").removesuffix("\r")
            hits.setdefault(path, {})[data["line_number"]] = (text, event["type"] == "match")
        if proc.returncode == 2 and not hits:
            raise GrepError(f"Grep failed: {stderr}")
        return hits

    def _render(self, hits: Hits, mode: str, args: dict, ctx: ToolContext, engine: str) -> ToolResult:
        files = sorted(hits, key=lambda p: p.parts)
        matched_lines = sum(is_match for f in files for _, is_match in hits[f].values())
        data = {"mode": mode, "num_files": len(files), "engine": engine}
        if mode != "files_with_matches":  # that mode stops at each file's first match
            data["num_matches"] = matched_lines
        if not files:
            return ToolResult("No matches found.", data=data)
        if mode == "files_with_matches":
            rows = [display_path(ctx, f) for f in files]
        elif mode == "count":
            rows = [f"{display_path(ctx, f)}:{sum(m for _, m in hits[f].values())}" for f in files]
        else:
            rows = self._content_rows(hits, files, ctx, args.get("-n", True), any(args.get(k) for k in "-A -B -C".split()))
        limit = args.get("head_limit", self.default_head_limit)
        shown = rows[:limit]
        if len(rows) > limit:
            shown.append(f"[Showing {limit} of {len(rows)} {'lines' if mode == 'content' else 'files'}; narrow the "
                         "search with path, glob or type, or raise head_limit.]")
        if mode == "count":
            shown.append(f"[{matched_lines} matching lines in {len(files)} files]")
        return ToolResult("\n".join(shown), data=data)

    def _content_rows(self, hits: Hits, files: list[Path], ctx: ToolContext, numbers: bool, context: bool) -> list[str]:
        rows: list[str] = []
        for f in files:
            shown = display_path(ctx, f)
            previous = None
            for n in sorted(hits[f]):
                text, is_match = hits[f][n]
                if context and rows and (previous is None or n > previous + 1):
                    rows.append("--")  # like ripgrep: a break between groups that are not adjacent
                previous = n
                if len(text) > self.max_line_chars:
                    text = text[: self.max_line_chars] + f"... [{len(text)} characters]"
                sep = ":" if is_match else "-"
                rows.append(f"{shown}{sep}{n}{sep}{text}" if numbers else f"{shown}{sep}{text}")
        return rows


def ripgrep_binary() -> str | None:
    """The `rg` the ripgrep package installs beside this Python (scripts dir), else one on PATH."""
    name = "rg.exe" if os.name == "nt" else "rg"
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("rg")


@dataclass
class _Search:
    pattern: str
    ignore_case: bool
    context: tuple[int, int]  # lines before, after
    glob: str | None
    type_globs: list[str]
    root: Path  # a directory, or the one file to search
    project_root: Path
    first_only: bool  # only whether a file matches matters


class _FallBack(Exception):
    """ripgrep cannot handle the pattern but Python can."""


def _text(field: dict) -> str:
    """ripgrep JSON gives text, or base64 bytes when it is not valid UTF-8."""
    if "text" in field:
        return field["text"]
    return base64.b64decode(field["bytes"]).decode("utf-8", errors="replace")


def _python_search(s: _Search) -> Hits:
    try:
        regex = re.compile(s.pattern, re.IGNORECASE if s.ignore_case else 0)
    except re.error as e:
        raise GrepError(f"Invalid regular expression: {e}.")
    explicit = s.root.is_file()
    type_regex = compile_glob("{" + ",".join(s.type_globs) + "}") if s.type_globs else None
    files = [s.root] if explicit else walk_files(s.root, s.project_root, GlobFilter([s.glob] if s.glob else []))
    hits: Hits = {}
    for path in files:
        if not explicit and type_regex and not type_regex.match(path.name):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if not explicit and b"\x00" in data:  # binary, skipped as ripgrep does when walking
            continue
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines[-1] == "":
            lines.pop()
        matches = []
        for i, line in enumerate(lines):
            if regex.search(line):
                matches.append(i)
                if s.first_only:
                    break
        is_match = set(matches)
        found: dict[int, tuple[str, bool]] = {}
        for i in matches:
            for j in range(max(0, i - s.context[0]), min(len(lines), i + 1 + s.context[1])):
                found[j + 1] = (lines[j].removesuffix("\r"), j in is_match)
        if found:
            hits[path] = found
    return hits

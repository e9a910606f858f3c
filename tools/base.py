"""The Tool seam: a name, a model-facing description, a JSON schema and run(args, ctx).

Expected failures (file not found, non-unique old_string, timeout) come back as a ToolResult
with is_error=True and text the model can act on; only flow control raises.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from tools.shells import ShellRegistry


@dataclass
class ToolResult:
    content: str  # what the model sees
    is_error: bool = False
    data: dict[str, Any] = field(default_factory=dict)  # structured extras for UIs and hooks (diff, exit_code, ...)


@dataclass
class FileStamp:
    """What the agent knew of a file when it last read or wrote it."""
    mtime_ns: int
    size: int


@dataclass
class ToolContext:
    cwd: Path  # the project root; Bash's working directory starts here
    read_files: dict[str, FileStamp] = field(default_factory=dict)  # absolute path -> stamp at last Read/Write/Edit
    todos: list[dict] = field(default_factory=list)
    cancel: threading.Event = field(default_factory=threading.Event)
    shell_cwd: Path | None = None  # Bash's persistent cwd; None = cwd
    env: dict[str, str] = field(default_factory=dict)  # extra environment for Bash (settings `env`)
    # Lines Read shows (the default and any explicit limit replaced), and what a "Read it first" refusal of Write/Edit/MultiEdit
    # shows (then counting as the Read); None: Read's own 2,000-line default, a plain refusal. The harness sets
    # it for small models, which die prefilling a 2,000-line window (docs/EVALS.md proposal 5).
    read_window: int | None = None
    # Write may drop most of an existing file only when this is set: the harness sets it when the user asked to
    # rewrite, replace or clear a file (a small model replaced a 5-line config.json with one line).
    allow_shrink: bool = False
    # Whether a Read deny rule covers a path (the session's Permissions.read_denied): Grep leaves such files out.
    read_denied: Callable[[Path], bool] | None = None
    # Background shells (Bash run_in_background, BashOutput, KillShell) and groups left running; stopped at session end.
    shells: ShellRegistry = field(default_factory=ShellRegistry)
    # Where Bash saves long outputs; the session makes a directory Read may open and removes it at the end.
    # None: the system temp dir (tools used without a session).
    output_dir: Path | None = None
    # Set by the harness for tools that need it (Task, Skill, ExitPlanMode); plain tools ignore it.
    services: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def resolve(self, path: str) -> Path:
        """An absolute, normalized path; relative paths are taken from the project root."""
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = self.cwd / p
        return Path(*Path(str(p)).resolve(strict=False).parts)


class Tool(Protocol):
    name: str
    description: str  # short: it is the model's only manual, sized for an 8k-32k window
    input_schema: dict  # JSON schema of the input object
    read_only: bool  # True when it never changes files or runs commands (plan mode, concurrency)

    def run(self, args: dict, ctx: ToolContext) -> ToolResult: ...


def schema_for_engine(tool: Tool) -> dict:
    """OpenAI-style function schema, the shape runtime.api.Request.tools expects."""
    return {"type": "function", "function": {"name": tool.name, "description": tool.description,
                                             "parameters": tool.input_schema}}

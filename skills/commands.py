"""Custom slash commands: markdown prompts in `.agent/commands` and `.claude/commands` (and user-level).

`review.md` is `/review`; `frontend/component.md` is `/frontend:component`. Frontmatter is optional
(description, argument-hint, allowed-tools, model); the body is the prompt. Project commands
shadow user commands of the same name, and `.agent/` shadows `.claude/` in the same scope.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from skills.discovery import config_dirs, substitute_arguments
from skills.frontmatter import FrontmatterError, as_bool, as_hint, as_text, read_frontmatter_file, split_tool_list

DESCRIPTION_FROM_BODY_CHARS = 100


@dataclass
class Command:
    name: str  # "review" or "frontend:component"
    description: str  # from the frontmatter, else the body's first line
    body: str
    path: Path
    source: str  # "project" | "user"
    argument_hint: str | None = None
    allowed_tools: list[str] | None = None  # None = the field was absent
    model: str | None = None
    disable_model_invocation: bool = False
    frontmatter: dict = field(default_factory=dict)


def discover_commands(project_dir: Path, user_home: Path | None = None, agent_home: Path | None = None,
                      claude_home: Path | None = None) -> tuple[list[Command], list[str]]:
    """All commands (sorted by name) and one warning per bad file; a bad file never stops the rest."""
    found: dict[str, Command] = {}
    warnings: list[str] = []
    for root, source in config_dirs("commands", project_dir, user_home, agent_home, claude_home=claude_home):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.md")):
            rel = path.relative_to(root)
            if any(part.startswith(".") for part in rel.parts):
                continue
            name = ":".join([*rel.parent.parts, rel.stem])
            if name in found:
                continue
            if any(ch.isspace() for ch in name):
                warnings.append(f"command skipped: {path}: a command name cannot contain spaces")
                continue
            command = _load(path, name, source, warnings)
            if command is not None:
                found[name] = command
    return sorted(found.values(), key=lambda c: c.name), warnings


def _load(path: Path, name: str, source: str, warnings: list[str]) -> Command | None:
    try:
        fm, body = read_frontmatter_file(path)
    except FrontmatterError as e:
        warnings.append(f"command skipped: {e}")
        return None
    if not body.strip():
        warnings.append(f"command skipped: {path}: the prompt (body) is empty")
        return None
    description = as_text(fm.get("description")) or _first_line(body)
    tools = fm.get("allowed-tools", fm.get("allowed_tools"))
    return Command(name=name, description=description, body=body, path=path, source=source,
                   argument_hint=as_hint(fm.get("argument-hint")),
                   allowed_tools=split_tool_list(tools) if tools is not None else None,
                   model=as_text(fm.get("model")),
                   disable_model_invocation=as_bool(fm.get("disable-model-invocation"), False),
                   frontmatter=fm)


def _first_line(body: str) -> str:
    line = next(ln.strip().lstrip("#").strip() for ln in body.splitlines() if ln.strip())
    return line if len(line) <= DESCRIPTION_FROM_BODY_CHARS else line[: DESCRIPTION_FROM_BODY_CHARS - 1] + "…"


def render(command: Command, args: str) -> str:
    """The prompt for `/name args`: `$ARGUMENTS`, `$ARGUMENTS[N]` and `$1`..`$9` filled in."""
    return substitute_arguments(command.body, args, positional=True)


def find_command(commands: list[Command], name: str) -> Command | None:
    """The command typed as `/name` (a leading slash is accepted)."""
    name = name.lstrip("/")
    return next((c for c in commands if c.name == name), None)

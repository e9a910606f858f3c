"""Skill discovery (SKILL.md directories), the resident index, and rendering a body for the context.

Locations, highest precedence first (the first skill of a name wins, later ones are shadowed):
project `.agent/skills`, `.claude/skills`, `.agents/skills`; user `~/.agent/skills` (AGENT_HOME),
`~/.claude/skills` (CLAUDE_CONFIG_DIR), `~/.agents/skills`; the built-in skills shipped in `skills/builtin/`.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from skills.frontmatter import FrontmatterError, as_bool, as_hint, as_text, read_frontmatter_file, split_tool_list

BUILTIN_DIR = Path(__file__).parent / "builtin"
NAME_RE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
INDEX_DESCRIPTION_CHARS = 300  # the index is resident in every prompt; keep each line short


@dataclass
class Skill:
    name: str  # the directory name
    description: str
    path: Path  # the SKILL.md
    dir: Path  # its directory: bundled files are read relative to it
    body: str
    source: str  # "project" | "user" | "builtin"
    allowed_tools: list[str] | None = None  # permission-rule strings; None = the field was absent
    disable_model_invocation: bool = False  # only the user can run it (`/name`); not in the index
    user_invocable: bool = True  # False: only the model can load it; not offered as `/name`
    argument_hint: str | None = None
    model: str | None = None
    frontmatter: dict = field(default_factory=dict)  # every field, for license, metadata and the like


def user_dirs(user_home: Path | None, agent_home: Path | None,
              claude_home: Path | None = None) -> tuple[Path, Path, Path]:
    """(user home, our user directory, Claude's): ~/.agent and ~/.claude unless given (the CLI resolves
    AGENT_HOME and CLAUDE_CONFIG_DIR)."""
    home = Path(user_home) if user_home is not None else Path.home()
    return (home, Path(agent_home) if agent_home is not None else home / ".agent",
            Path(claude_home) if claude_home is not None else home / ".claude")


def config_dirs(kind: str, project_dir: Path, user_home: Path | None = None, agent_home: Path | None = None,
                with_agents_dir: bool = False, claude_home: Path | None = None) -> list[tuple[Path, str]]:
    """(directory, "project" | "user") for `kind` ("skills", "commands", "agents"), highest precedence first."""
    home, ours, claude = user_dirs(user_home, agent_home, claude_home)
    project = Path(project_dir)
    project_dirs = [project / ".agent" / kind, project / ".claude" / kind]
    home_dirs = [ours / kind, claude / kind]
    if with_agents_dir:  # `.agents/skills` is the cross-agent skills location
        project_dirs.append(project / ".agents" / kind)
        home_dirs.append(home / ".agents" / kind)
    out, seen = [], set()
    for d, source in [(d, "project") for d in project_dirs] + [(d, "user") for d in home_dirs]:
        key = d.resolve(strict=False)
        if key not in seen:  # running in ~ makes the project and user directories the same
            seen.add(key)
            out.append((d, source))
    return out


def skill_roots(project_dir: Path, user_home: Path | None = None, agent_home: Path | None = None,
                claude_home: Path | None = None) -> list[tuple[Path, str]]:
    return config_dirs("skills", project_dir, user_home, agent_home, with_agents_dir=True,
                       claude_home=claude_home) + [(BUILTIN_DIR, "builtin")]


def discover_skills(project_dir: Path, user_home: Path | None = None, agent_home: Path | None = None,
                    claude_home: Path | None = None) -> tuple[list[Skill], list[str]]:
    """All skills by name (sorted) and one warning per problem file; a bad file never stops the rest."""
    found: dict[str, Skill] = {}
    warnings: list[str] = []
    for root, source in skill_roots(project_dir, user_home, agent_home, claude_home):
        if not root.is_dir():
            continue
        for d in sorted(root.iterdir()):
            skill_md = d / "SKILL.md"
            if d.name.startswith(".") or d.name in found or not skill_md.is_file():
                continue
            skill = load_skill(skill_md, source, warnings)
            if skill is not None:
                found[d.name] = skill
    return sorted(found.values(), key=lambda s: s.name), warnings


def load_skill(skill_md: Path, source: str, warnings: list[str]) -> Skill | None:
    """One SKILL.md; problems are appended to warnings, and None means the skill is skipped."""
    try:
        fm, body = read_frontmatter_file(skill_md)
    except FrontmatterError as e:
        warnings.append(f"skill skipped: {e}")
        return None
    name = skill_md.parent.name
    declared = as_text(fm.get("name"))
    if declared is not None and declared != name:
        warnings.append(f"{skill_md}: name {declared!r} does not match its directory; using {name!r}")
    if not NAME_RE.fullmatch(name) or len(name) > 64:
        warnings.append(f"{skill_md}: skill name {name!r} should be lowercase letters, digits and hyphens")
    description = as_text(fm.get("description"))
    if description is None:
        warnings.append(f"skill skipped: {skill_md}: no `description` in the frontmatter")
        return None
    tools = fm.get("allowed-tools", fm.get("allowed_tools"))
    return Skill(
        name=name, description=description, path=skill_md, dir=skill_md.parent, body=body, source=source,
        allowed_tools=split_tool_list(tools) if tools is not None else None,
        disable_model_invocation=as_bool(fm.get("disable-model-invocation"), False),
        user_invocable=as_bool(fm.get("user-invocable", fm.get("user-invokable")), True),
        argument_hint=as_hint(fm.get("argument-hint")), model=as_text(fm.get("model")), frontmatter=fm)


def skills_index_text(skills: list[Skill]) -> str:
    """`- name: description` lines, sorted by name, for the skills the model may load ('' if none)."""
    lines = []
    for s in sorted(skills, key=lambda s: s.name):
        if s.disable_model_invocation:
            continue
        desc = " ".join(s.description.split())
        if len(desc) > INDEX_DESCRIPTION_CHARS:
            desc = desc[: INDEX_DESCRIPTION_CHARS - 1] + "…"
        lines.append(f"- {s.name}: {desc}")
    return "\n".join(lines)


def render_skill_body(skill: Skill, arguments: str) -> str:
    """The message that loads a skill: its base directory, then the body with arguments filled in.

    Built-in skills ship no files to refer to, and their directory (inside the installed package) was
    taken for the project by models that then edited files there, so it is not shown for them."""
    body = substitute_arguments(skill.body, arguments)
    if skill.source == "builtin":
        return body.rstrip() + "\n"
    return f"Base directory for this skill: {skill.dir}\n\n{body}".rstrip() + "\n"


_PLACEHOLDER = re.compile(r"\$ARGUMENTS\[(\d+)\]|\$ARGUMENTS\b|\$([1-9])(?!\d)")


def substitute_arguments(body: str, arguments: str, positional: bool = False) -> str:
    """Fill `$ARGUMENTS`, `$ARGUMENTS[N]` (0-based) and, when positional, `$1`..`$9` (1-based).

    Positional values are split like a shell (quotes group words); a missing one becomes ''.
    A body with no placeholder gets `ARGUMENTS: ...` appended when arguments were given, as
    Claude Code does, so the arguments are never silently dropped.
    """
    arguments = arguments.strip()
    try:
        words = shlex.split(arguments)
    except ValueError:  # an unbalanced quote: fall back to plain words
        words = arguments.split()
    used = False

    def fill(m: re.Match) -> str:
        nonlocal used
        if m.group(2) is not None and not positional:
            return m.group(0)  # `$1` in a skill body is left alone (it is often shell or awk text)
        used = True
        if m.group(1) is not None:
            i = int(m.group(1))
            return words[i] if i < len(words) else ""
        if m.group(2) is not None:
            i = int(m.group(2)) - 1
            return words[i] if i < len(words) else ""
        return arguments

    out = _PLACEHOLDER.sub(fill, body)
    if not used and arguments:
        out = out.rstrip("\n") + f"\n\nARGUMENTS: {arguments}"
    return out

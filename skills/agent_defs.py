"""Subagent definitions: `.agent/agents/*.md`, `.claude/agents/*.md` (and user-level) plus the built-ins.

Frontmatter: name, description (required), tools (comma/space list or YAML list; absent = every
tool the parent has), model (`inherit` by default); the body is the subagent's system prompt.
Project definitions shadow user ones, which shadow the built-ins, by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from skills.discovery import config_dirs
from skills.frontmatter import FrontmatterError, as_text, read_frontmatter_file, split_tool_list

READ_ONLY_TOOLS = ["Read", "Grep", "Glob", "LS"]


@dataclass
class AgentDef:
    name: str
    description: str
    system_prompt: str
    tools: list[str] | None = None  # None = all of the parent's tools; a child never gains more
    model: str = "inherit"
    source: str = "builtin"  # "project" | "user" | "builtin"
    path: Path | None = None
    frontmatter: dict = field(default_factory=dict)


BUILTIN_AGENTS = [
    AgentDef(
        name="general-purpose",
        description="General-purpose agent for researching complex questions, searching for code and "
                    "carrying out multi-step tasks. Use it when a search may take several tries.",
        system_prompt=(
            "You are a subagent working for another coding agent. Do the task you are given completely, "
            "using the tools available. Search broadly when you do not know where something lives; "
            "read the files that matter before drawing conclusions; do not create files unless the "
            "task requires it.\n\n"
            "When you are done, reply with a concise report: what you did or found, the relevant file "
            "paths with line numbers, and anything left unresolved. Your final message is the only "
            "thing the other agent sees, so put everything it needs in it.")),
    AgentDef(
        name="Explore",
        description="Fast read-only agent for exploring a codebase: find files by pattern, search code "
                    "for keywords, answer questions about how the code works.",
        tools=list(READ_ONLY_TOOLS),
        system_prompt=(
            "You are a read-only code search subagent. You cannot modify files or run commands. "
            "Use Glob to find files by name, Grep to search contents, LS to list directories and "
            "Read to look at the relevant parts. Start broad, then narrow down; try other names "
            "and spellings when a search finds nothing.\n\n"
            "Report your findings concisely: the answer first, then the evidence as "
            "`path:line` references with a short note each. Do not pad the report.")),
    AgentDef(
        name="Plan",
        description="Read-only planning agent: studies the code and returns a step-by-step "
                    "implementation plan. Use it before non-trivial changes.",
        tools=list(READ_ONLY_TOOLS),
        system_prompt=(
            "You are a read-only planning subagent. You cannot modify files or run commands. "
            "Study the code the task touches (Glob, Grep, LS, Read) until you understand how it "
            "works today, then return a plan.\n\n"
            "The plan is a numbered list of concrete steps. Each step names the files and "
            "functions to change and what to change in them. End with how to verify the result "
            "(the tests to run or write) and any risks or open questions.")),
]


def discover_agents(project_dir: Path, user_home: Path | None = None, agent_home: Path | None = None,
                    claude_home: Path | None = None) -> tuple[list[AgentDef], list[str]]:
    """All definitions (built-ins first, then sorted by name) and one warning per bad file."""
    found: dict[str, AgentDef] = {}
    warnings: list[str] = []
    for root, source in config_dirs("agents", project_dir, user_home, agent_home, claude_home=claude_home):
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*.md")):
            agent = _load(path, source, warnings)
            if agent is not None and agent.name not in found:
                found[agent.name] = agent
    for agent in BUILTIN_AGENTS:
        found.setdefault(agent.name, agent)
    builtin = [a.name for a in BUILTIN_AGENTS]
    order = {name: i for i, name in enumerate(builtin)}
    return sorted(found.values(), key=lambda a: (order.get(a.name, len(builtin)), a.name)), warnings


def _load(path: Path, source: str, warnings: list[str]) -> AgentDef | None:
    try:
        fm, body = read_frontmatter_file(path)
    except FrontmatterError as e:
        warnings.append(f"agent skipped: {e}")
        return None
    name = as_text(fm.get("name")) or path.stem
    if any(ch.isspace() for ch in name):
        warnings.append(f"agent skipped: {path}: name {name!r} cannot contain spaces")
        return None
    description = as_text(fm.get("description"))
    if description is None:
        warnings.append(f"agent skipped: {path}: no `description` in the frontmatter")
        return None
    if not body.strip():
        warnings.append(f"agent skipped: {path}: the system prompt (body) is empty")
        return None
    tools = fm.get("tools")
    tool_list = split_tool_list(tools) if tools is not None else None
    if tool_list is not None and (tool_list == ["*"] or (tool_list == [] and not isinstance(tools, list))):
        tool_list = None  # `tools: *` and `tools:` (empty) mean all, as an absent field does
    return AgentDef(name=name, description=description, system_prompt=body.strip(), tools=tool_list,
                    model=as_text(fm.get("model")) or "inherit", source=source, path=path, frontmatter=fm)


def find_agent(agents: list[AgentDef], name: str) -> AgentDef | None:
    return next((a for a in agents if a.name == name), None)


def agents_index_text(agents: list[AgentDef]) -> str:
    """`- name: description` lines for the Task tool's description."""
    return "\n".join(f"- {a.name}: {' '.join(a.description.split())}" for a in agents)

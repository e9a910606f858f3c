"""What a session discovers once (skills, commands, subagent definitions) and how it is wired into an Agent.

attach_harness() gives one agent its services: the Skill loader, the subagent runner (Task), the
ExitPlanMode flow and per-prompt grants ("allow_for_prompt": a `/name args` prompt's allowed-tools).
The subagent runner wires each child the same way, one level deeper.

Skills: the index (name + description, and the subagent types) goes into the first user message
(ContextBuilder.indexes), never into the system prompt or a tool description, so the cached prefix
stays byte-stable. A skill's or command's allowed-tools become allow rules for the rest of that
prompt's run (source "allowed-tools: ..."), revoked when the next prompt starts; deny rules and
plan mode still win because Permissions checks them first.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agent.core import events as ev
from agent.core.model_text import agents_index_block, skills_index_block
from agent.core.intent import asks_to_delegate
from agent.harness.grant_guard import Baseline, approved_rules
from agent.harness.plan import CHILD_PLAN_NOTE, PLAN_NOTE, PlanModeNote, child_exit_plan, headless_exit_plan
from agent.harness.subagents import SubagentConfig, SubagentRunner
from agent.paths import locations
from skills.agent_defs import AgentDef, agents_index_text, discover_agents
from skills.commands import Command, discover_commands, find_command, render
from skills.discovery import Skill, discover_skills, load_skill, render_skill_body, skills_index_text
from tools.base import ToolResult

GRANT_SOURCE = "allowed-tools"  # prefix of the source of rules granted for one run
_SLASH = re.compile(r"/([^\s/]+)(?:\s+(.*))?", re.DOTALL)


@dataclass
class Expanded:
    """A `/name args` prompt turned into the text the model gets."""
    prompt: str
    allowed_tools: list[str] | None
    source: str  # "/name" for a command, "skill name" for a skill
    path: Path | None = None  # its file: grants need approval when it changed during the session


@dataclass
class Harness:
    project: Path
    skills: list[Skill] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    agents: list[AgentDef] = field(default_factory=list)
    subagents: SubagentConfig = field(default_factory=SubagentConfig)
    # The main agent's ExitPlanMode service; None = the headless one (print the plan, end the run).
    exit_plan: Callable[[str], ToolResult] | None = None
    warnings: list[str] = field(default_factory=list)  # one line per bad skill, command or agent file
    # The interactive session's configuration generation (bumped by the config watcher): rediscover on change.
    generation: Callable[[], int] | None = None
    homes: tuple = (None, None, None)  # (user home, agent home, claude home) searched for user-level files
    baseline: Baseline | None = None  # skill and command files as first discovered (grant_guard)
    _seen: int = 0

    @classmethod
    def discover(cls, project: Path, *, subagents: SubagentConfig | None = None,
                 exit_plan: Callable[[str], ToolResult] | None = None, user_home: Path | None = None,
                 agent_home: Path | None = None, claude_home: Path | None = None) -> "Harness":
        """Skills, commands and agents from every location (FORMATS.md); bad files become warnings. Homes not
        given are the installed locations (agent.paths)."""
        where = locations()
        homes = (user_home or where.user_home, agent_home or where.agent_home, claude_home or where.claude_home)
        skills, sw = discover_skills(project, *homes)
        commands, cw = discover_commands(project, *homes)
        agents, aw = discover_agents(project, *homes)
        return cls(Path(project), skills, commands, agents, subagents or SubagentConfig(), exit_plan, sw + cw + aw,
                   homes=homes, baseline=Baseline([s.path for s in skills] + [c.path for c in commands]))

    def refresh(self) -> None:
        """Discover skills, commands and agents again when their files changed (the index text stays)."""
        if self.generation is None or self.generation() == self._seen:
            return
        self._seen = self.generation()
        fresh = Harness.discover(self.project, user_home=self.homes[0], agent_home=self.homes[1],
                                 claude_home=self.homes[2])
        self.skills, self.commands, self.agents, self.warnings = fresh.skills, fresh.commands, fresh.agents, fresh.warnings

    def index_text(self, *, builtins: bool = True) -> str:
        """The <skills> and <agents> blocks for the first user message ('' when there is nothing).

        builtins=False lists only the user's and project's own skills and agents (the profile's builtin_index):
        for a small model the built-in index costs more than it gives (docs/EVALS.md). Built-ins still work by name.
        """
        parts = []
        skills = skills_index_text([s for s in self.skills if builtins or s.source != "builtin"])
        if skills:
            parts.append(skills_index_block(skills))
        agents = [a for a in self.agents if builtins or a.source != "builtin"]
        if agents:
            parts.append(agents_index_block(agents_index_text(agents)))
        return "\n\n".join(parts)

    def expand(self, line: str) -> Expanded | None:
        """`/name args` for a custom command (first) or a user-invocable skill; None for anything else."""
        self.refresh()
        m = _SLASH.fullmatch(line.strip())
        if not m:
            return None
        name, args = m.group(1), m.group(2) or ""
        command = find_command(self.commands, name)
        if command is not None:
            return Expanded(render(command, args), command.allowed_tools, f"/{command.name}", command.path)
        skill = next((s for s in self.skills if s.name == name and s.user_invocable), None)
        if skill is not None:
            skill = _fresh(skill)
            return Expanded(render_skill_body(skill, args), skill.allowed_tools, f"skill {skill.name}", skill.path)
        return None


class RunGrants:
    """Allow rules that last for one prompt's run: a skill's or command's allowed-tools.

    A bus subscriber: when a prompt starts, the previous run's grants are revoked and the ones
    armed for this prompt (`/name args`) are applied; the Skill tool grants during the run.
    """

    def __init__(self, agent: Any) -> None:
        self.agent = agent
        self.pending: list[tuple[list[str], str]] = []

    def grant(self, rules: list[str], source: str) -> None:
        permissions = self.agent.permissions
        if permissions is not None:
            for rule in rules:
                permissions.add_rule(rule, "allow", f"{GRANT_SOURCE}: {source}")

    def grant_next(self, rules: list[str] | None, source: str) -> None:
        if rules:
            self.pending.append((list(rules), source))

    def revoke(self) -> None:
        permissions = self.agent.permissions
        if permissions is not None:
            permissions.rules["allow"] = [r for r in permissions.rules["allow"]
                                          if not r.source.startswith(GRANT_SOURCE + ":")]

    def __call__(self, event: ev.Event) -> None:
        if isinstance(event, ev.UserPromptSubmit):
            self.revoke()
            pending, self.pending = self.pending, []
            for rules, source in pending:
                self.grant(rules, source)


def _fresh(skill: Skill) -> Skill:
    """The skill as its file reads now (edited since discovery?), else as discovered."""
    return load_skill(skill.path, skill.source, []) or skill


def load_skill_service(harness: Harness, grants: RunGrants) -> Callable[[str, str], ToolResult]:
    def load(name: str, args: str) -> ToolResult:
        harness.refresh()
        name = name.strip().lstrip("/")
        skill = next((s for s in harness.skills if s.name == name), None)
        if skill is None or skill.disable_model_invocation:
            available = ", ".join(s.name for s in harness.skills if not s.disable_model_invocation) or "none"
            why = "can only be run by the user (as /name)" if skill else "does not exist"
            return ToolResult(f"Error: skill {name!r} {why}. Available skills: {available}.", is_error=True)
        skill = _fresh(skill)
        rules, note = approved_rules(grants.agent, harness.baseline, skill.path, skill.allowed_tools,
                                     f"skill {skill.name}")
        if rules:
            grants.grant(rules, f"skill {skill.name}")
        return ToolResult(render_skill_body(skill, args) + (f"\n\n{note}" if note else ""),
                          data={"skill": skill.name, "path": str(skill.path), "allowed_tools": skill.allowed_tools or []})
    return load


def attach_harness(agent: Any, harness: Harness, *, depth: int = 0, parent_runner: Any = None) -> None:
    """Give `agent` its harness services (and, at depth 0, the indexes in its first user message)."""
    grants = RunGrants(agent)
    agent.bus.subscribe(grants)
    agent.bus.subscribe(PlanModeNote(lambda: agent.permissions.mode if agent.permissions is not None else "default",
                                     PLAN_NOTE if depth == 0 else CHILD_PLAN_NOTE))
    runner = SubagentRunner(agent, harness, attach_harness, depth=depth, parent=parent_runner)
    if depth == 0:
        exit_plan = harness.exit_plan or headless_exit_plan(agent)
    else:
        exit_plan = child_exit_plan
    agent.ctx.services.update({"task": runner.run, "skill": load_skill_service(harness, grants),
                               "exit_plan_mode": exit_plan, "allow_for_prompt": grants.grant_next,
                               "skill_names": lambda: [s.name for s in harness.skills if not s.disable_model_invocation]})
    profile = agent.profile
    if depth == 0 and agent.context is not None:
        agent.context.indexes = harness.index_text(builtins=profile.builtin_index)
    if profile.skill_tool == "when_user_skills" and not any(s.source != "builtin" for s in harness.skills):
        agent.withdraw_tool("Skill")  # nothing of the user's to load; the name invites task words as skill names


def narrow_for_request(agent: Any, prompt: str) -> None:
    """Before the first request of a headless run: Task only when the profile offers it or the prompt asks for it."""
    if agent.profile.task_tool == "when_asked" and not asks_to_delegate(prompt):
        agent.withdraw_tool("Task")


def expand_prompt(agent: Any, harness: Harness, prompt: str) -> str:
    """A `/name args` prompt expanded (its allowed-tools armed for the run); any other prompt unchanged."""
    expanded = harness.expand(prompt)
    if expanded is None:
        return prompt
    rules, _ = approved_rules(agent, harness.baseline, expanded.path, expanded.allowed_tools, expanded.source)
    agent.ctx.services["allow_for_prompt"](rules, expanded.source)
    return expanded.prompt


def armed(agent: Any, rules: list[str] | None, source: str, prompt: str, path: Path | None = None,
          baseline: Baseline | None = None) -> str:
    """`prompt` unchanged; `rules` (a command's or skill's allowed-tools) are allowed during its run, once the
    user approved them when `path` changed since `baseline`."""
    rules, _ = approved_rules(agent, baseline, path, rules, source)
    grant = agent.ctx.services.get("allow_for_prompt")
    if grant is not None:
        grant(rules, source)
    return prompt

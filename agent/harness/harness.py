"""The harness tools (Task, Skill, ExitPlanMode) and their wiring into an Agent.

tools/ must not import agent, so these three live here. Each is a thin Tool that calls a service
the harness puts in ToolContext.services (a bare ToolContext gets a one-line "not available"):
  "task"             (description, prompt, subagent_type) -> ToolResult: a subagent's final report
  "skill"            (name, args) -> ToolResult: the skill body, loaded as the tool result (the tail)
  "exit_plan_mode"   (plan) -> ToolResult: headless ends the run; interactive asks the user
  "allow_for_prompt" (rules, source) -> None: allow rules for the next prompt's run (`/name args`)

Harness holds what a session discovers once (skills, commands, subagent definitions and their
warnings) and how a plan is approved here; attach_harness() wires one agent, and the subagent
runner wires each child the same way, one level deeper.

Skills: the index (name + description, and the subagent types) goes into the first user message
(ContextBuilder.indexes), never into the system prompt or a tool description, so the cached prefix
stays byte-stable. A skill's or command's allowed-tools become allow rules for the rest of that
prompt's run (source "allowed-tools: ..."), revoked when the next prompt starts; deny rules and
plan mode still win because Permissions checks them first.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

from agent.core import events as ev
from agent.harness.subagents import SubagentConfig
from skills.agent_defs import READ_ONLY_TOOLS, AgentDef, agents_index_text, discover_agents
from skills.commands import Command, discover_commands, find_command, render
from skills.discovery import Skill, discover_skills, load_skill, render_skill_body, skills_index_text
from tools.base import ToolContext, ToolResult

GRANT_SOURCE = "allowed-tools"  # prefix of the source of rules granted for one run
_SLASH = re.compile(r"/([^\s/]+)(?:\s+(.*))?", re.DOTALL)


def _unavailable(what: str) -> ToolResult:
    return ToolResult(f"Error: {what} is not available in this session.", is_error=True)


@dataclass
class TaskTool:
    name: ClassVar[str] = "Task"
    read_only: ClassVar[bool] = True  # for scheduling only: siblings run at once; each child has its own checks
    # Short and name-like: small models copy a tool's description into its first string argument (6 Task
    # calls in docs/EVALS.md), and as a title this does no harm. What a prompt needs is said on `prompt`.
    description: ClassVar[str] = "Delegate a self-contained job to a subagent"
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "A 3-5 word title"},
            "prompt": {"type": "string",
                       "description": "The whole job; the subagent sees nothing else and returns one report"},
            "subagent_type": {"type": "string", "description": "A type from <agents>, e.g. general-purpose"},
        },
        "required": ["description", "prompt", "subagent_type"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        service = ctx.services.get("task")
        if service is None:
            return _unavailable("the Task tool (subagents)")
        if _is_schema_text(self, args.get("prompt")):  # a copied description: the child would have no job
            return ToolResult("Error: that prompt is text from the Task tool's schema, not a job. Write in "
                              "`prompt` what the subagent should do, or do it yourself with the other tools.",
                              is_error=True)
        return service(str(args.get("description", "")), str(args.get("prompt", "")),
                       str(args.get("subagent_type", "")))


@dataclass
class SkillTool:
    name: ClassVar[str] = "Skill"
    read_only: ClassVar[bool] = True  # it only returns text (and may grant the skill's allowed-tools)
    description: ClassVar[str] = (
        "Load a skill: instructions for a kind of task, listed in <skills>. Call it when the task matches a "
        'skill\'s description, then follow the instructions it returns. Example: {"skill": "commit"}.')
    input_schema: ClassVar[dict] = {
        "type": "object",
        "properties": {
            "skill": {"type": "string", "description": "The skill's name"},
            "args": {"type": "string", "description": "Optional arguments for the skill"},
        },
        "required": ["skill"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        service = ctx.services.get("skill")
        if service is None:
            return _unavailable("the Skill tool")
        return service(str(args.get("skill", "")), str(args.get("args") or ""))


@dataclass
class ExitPlanModeTool:
    name: ClassVar[str] = "ExitPlanMode"
    read_only: ClassVar[bool] = False  # it may change the permission mode; never run beside other calls
    description: ClassVar[str] = (
        "In plan mode, when your research is done: present your plan (markdown, numbered steps naming the "
        "files to change) for the user to approve. Once approved you may edit files and run commands.")
    input_schema: ClassVar[dict] = {
        "type": "object",
        # No description: "The plan, in markdown" came back as the plan (5 calls by the 1.5B, docs/EVALS.md).
        "properties": {"plan": {"type": "string"}},
        "required": ["plan"],
        "additionalProperties": False,
    }

    def run(self, args: dict, ctx: ToolContext) -> ToolResult:
        service = ctx.services.get("exit_plan_mode")
        if service is None:
            return _unavailable("ExitPlanMode")
        plan = str(args.get("plan", "")).strip()
        if not plan:
            return ToolResult("Error: the plan is empty. Write the plan (numbered steps) in `plan`.", is_error=True)
        if _is_schema_text(self, plan):
            return ToolResult("Error: that is this tool's description, not a plan. Write your plan (numbered "
                              "steps naming the files to change) in `plan`.", is_error=True)
        return service(plan)


def _is_schema_text(tool: Any, value: Any) -> bool:
    """True when `value` is the tool's own description or one of its properties' (copied, not written)."""
    text = str(value or "").strip().rstrip(".").lower()
    props = tool.input_schema.get("properties", {}).values()
    known = [tool.description] + [p.get("description", "") for p in props]
    return bool(text) and any(text == k.strip().rstrip(".").lower() for k in known if k)


def offered_order(tools: list) -> list:
    """Read-only search tools first, then the rest in their given order: Explore and Plan children, whose
    allowlist is exactly those four, then share the parent's cached prefix through their whole tool list."""
    first = [name for name in READ_ONLY_TOOLS]
    return sorted(tools, key=lambda t: first.index(t.name) if t.name in first else len(first))


def harness_tools() -> list:
    """Fresh Task, Skill and ExitPlanMode tools, offered after the built-ins (a fixed order: it is cached)."""
    return [TaskTool(), SkillTool(), ExitPlanModeTool()]


@dataclass
class Expanded:
    """A `/name args` prompt turned into the text the model gets."""
    prompt: str
    allowed_tools: list[str] | None
    source: str  # "/name" for a command, "skill name" for a skill


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
    _seen: int = 0

    @classmethod
    def discover(cls, project: Path, *, subagents: SubagentConfig | None = None,
                 exit_plan: Callable[[str], ToolResult] | None = None,
                 user_home: Path | None = None, agent_home: Path | None = None) -> "Harness":
        """Skills, commands and agents from every location (FORMATS.md); bad files become warnings."""
        skills, sw = discover_skills(project, user_home, agent_home)
        commands, cw = discover_commands(project, user_home, agent_home)
        agents, aw = discover_agents(project, user_home, agent_home)
        return cls(Path(project), skills, commands, agents, subagents or SubagentConfig(), exit_plan, sw + cw + aw)

    def refresh(self) -> None:
        """Discover skills, commands and agents again when their files changed (the index text stays)."""
        if self.generation is None or self.generation() == self._seen:
            return
        self._seen = self.generation()
        fresh = Harness.discover(self.project)
        self.skills, self.commands, self.agents, self.warnings = fresh.skills, fresh.commands, fresh.agents, fresh.warnings

    def index_text(self, *, builtins: bool = True) -> str:
        """The <skills> and <agents> blocks for the first user message ('' when there is nothing).

        builtins=False lists only the user's and project's own skills and agents: for a small model the
        built-in index (~300 tokens before the request) costs more than it gives (P(first reply is a tool
        call) 0.82 without it, 0.57 with it on the 0.5B; docs/EVALS.md). The built-ins still work by name.
        """
        parts = []
        skills = skills_index_text([s for s in self.skills if builtins or s.source != "builtin"])
        if skills:
            parts.append("<skills>\nSkills you can load with the Skill tool when a task matches:\n"
                         f"{skills}\n</skills>")
        agents = [a for a in self.agents if builtins or a.source != "builtin"]
        if agents:
            parts.append("<agents>\nSubagent types for the Task tool:\n"
                         f"{agents_index_text(agents)}\n</agents>")
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
            return Expanded(render(command, args), command.allowed_tools, f"/{command.name}")
        skill = next((s for s in self.skills if s.name == name and s.user_invocable), None)
        if skill is not None:
            skill = _fresh(skill)
            return Expanded(render_skill_body(skill, args), skill.allowed_tools, f"skill {skill.name}")
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
        if skill.allowed_tools:
            grants.grant(skill.allowed_tools, f"skill {skill.name}")
        return ToolResult(render_skill_body(skill, args),
                          data={"skill": skill.name, "path": str(skill.path), "allowed_tools": skill.allowed_tools or []})
    return load


def attach_harness(agent: Any, harness: Harness, *, depth: int = 0, parent_runner: Any = None) -> None:
    """Give `agent` its harness services (and, at depth 0, the indexes in its first user message)."""
    from agent.harness.plan import CHILD_PLAN_NOTE, PLAN_NOTE, PlanModeNote, child_exit_plan, headless_exit_plan
    from agent.harness.subagents import SubagentRunner

    grants = RunGrants(agent)
    agent.bus.subscribe(grants)
    agent.bus.subscribe(PlanModeNote(lambda: agent.permissions.mode if agent.permissions is not None else "default",
                                     PLAN_NOTE if depth == 0 else CHILD_PLAN_NOTE))
    runner = SubagentRunner(agent, harness, depth=depth, parent=parent_runner)
    if depth == 0:
        exit_plan = harness.exit_plan or headless_exit_plan(agent)
    else:
        exit_plan = child_exit_plan
    agent.ctx.services.update({"task": runner.run, "skill": load_skill_service(harness, grants),
                               "exit_plan_mode": exit_plan, "allow_for_prompt": grants.grant_next})
    small = getattr(agent, "small_model", False)
    if depth == 0 and agent.context is not None:
        agent.context.indexes = harness.index_text(builtins=not small)
    if small and not any(s.source != "builtin" for s in harness.skills):
        # A small model sees no built-in skills in its index, and with the Skill tool offered it still took task
        # words for skill names: 5 of the 1.5B's first 7 suite tries called Skill("fix"/"add_function") and
        # gave up on the error. With no project or user skill there is nothing for it to load.
        agent.withdraw_tool("Skill")


DELEGATION = re.compile(r"\b(sub-?agents?|delegat\w*|Task tool)\b", re.IGNORECASE)  # a request that asks for Task


def setup_headless(agent: Any, project: Path, prompt: str, env: Mapping[str, str],
                   warn: Callable[[str], None]) -> str:
    """`agent -p` wiring: discover, warn, attach; a `/name args` prompt is expanded and its allowed-tools armed."""
    try:
        config = SubagentConfig.from_env(env)
    except ValueError as e:
        warn(f"{e}; using the defaults")
        config = SubagentConfig()
    harness = Harness.discover(project, subagents=config)
    for w in harness.warnings:
        warn(w)
    attach_harness(agent, harness)
    if getattr(agent, "small_model", False) and not DELEGATION.search(prompt):
        # Unasked, a small model hands simple jobs to a subagent that re-prefills its own prompt: the 1.5B
        # called Task first in 5 suite tries that did not ask for one (EVALS.md E3: 2 of 3 failures too).
        agent.withdraw_tool("Task")
    expanded = harness.expand(prompt)
    if expanded is None:
        return prompt
    agent.ctx.services["allow_for_prompt"](expanded.allowed_tools, expanded.source)
    return expanded.prompt


def setup_interactive(controller: Any) -> Harness:
    """TUI/plain wiring (controller is agent.interactive.Interactive); plan approval asks the user."""
    from agent.harness.plan import interactive_exit_plan

    try:
        config = SubagentConfig.from_env(os.environ)
    except ValueError as e:
        controller.notify(f"{e}; using the defaults")
        config = SubagentConfig()
    harness = Harness.discover(controller.project, subagents=config, exit_plan=interactive_exit_plan(controller))
    harness.generation = lambda: getattr(controller, "config_generation", 0)
    for w in harness.warnings:
        if w.startswith("agent skipped"):  # skill and command warnings are shown by the slash registry
            controller.notify(w)
    attach_harness(controller.agent, harness)
    return harness


def armed(agent: Any, rules: list[str] | None, source: str, prompt: str) -> str:
    """`prompt` unchanged; `rules` (a command's or skill's allowed-tools) are allowed during its run."""
    grant = agent.ctx.services.get("allow_for_prompt")
    if grant is not None:
        grant(rules, source)
    return prompt

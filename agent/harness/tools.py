"""The harness tools Task, Skill and ExitPlanMode: thin Tools over services the harness provides.

tools/ must not import agent, so these three live here. Each calls a service the harness puts in
ToolContext.services (a bare ToolContext gets a one-line "not available"):
  "task"             (description, prompt, subagent_type) -> ToolResult: a subagent's final report
  "skill"            (name, args) -> ToolResult: the skill body, loaded as the tool result (the tail)
  "exit_plan_mode"   (plan) -> ToolResult: headless ends the run; interactive asks the user
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from skills.agent_defs import READ_ONLY_TOOLS
from tools.base import ToolContext, ToolResult


def _unavailable(what: str) -> ToolResult:
    return ToolResult(f"Error: {what} is not available in this session.", is_error=True)


@dataclass
class TaskTool:
    name: ClassVar[str] = "Task"
    read_only: ClassVar[bool] = True  # for scheduling only: siblings run at once; each child has its own checks
    # Short and name-like: small models copy a tool's description into its first string argument (docs/EVALS.md),
    # and as a title this does no harm. What a prompt needs is said on `prompt`.
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
        # No description: small models copied it back as the plan (docs/EVALS.md).
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

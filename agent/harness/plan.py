"""Plan mode: what the model is told while it is on, and ExitPlanMode's approval flows.

Enforcement is in the harness, not in the tool list: the tools offered to the engine stay the same
in every mode, because the tool list sits in the cached prefix and changing it at a mode switch
would re-prefill the whole conversation (minutes on a CPU). In plan mode Permissions.check denies
every tool that is not read-only (except the harness tools: TodoWrite, Task with children that
inherit plan mode, Skill, ExitPlanMode) before hooks or approval are consulted, with a message that
says to call ExitPlanMode. The model learns the mode from a note at the tail of each prompt
(PlanModeNote), never from the system prompt.

ExitPlanMode(plan):
- headless: the plan becomes the run's answer (the tool result carries data["end_run"], which ends
  the loop with the plan as its text; the result subtype is success). The mode does not change.
- interactive: the user is asked (SessionCore.ask, the same modal as permission prompts, tool name
  "ExitPlanMode"); "once" switches to default, "always" to acceptEdits, "deny" keeps plan mode and
  passes the user's feedback to the model. A Notification hook fires when the question is shown.
- a subagent: refused; a child never approves its own plan, it reports it.
"""
from __future__ import annotations

from typing import Any, Callable

from agent.core import events as ev
from agent.core.approval import PermissionRequest
from tools.base import ToolResult

PLAN_NOTE = ("Plan mode is on: only read-only tools run (Read, Grep, Glob, LS, TodoWrite, Skill, and Task with "
             "read-only subagents); edits and commands are refused. Research the task, then call ExitPlanMode "
             "with your plan (numbered steps naming the files to change) for the user to approve.")
CHILD_PLAN_NOTE = ("Plan mode is on: only read-only tools run (Read, Grep, Glob, LS, TodoWrite, Skill); edits and "
                   "commands are refused. Put your findings or plan in your final reply.")
PLAN_OFF_NOTE = "Plan mode is off: you may edit files and run commands again."
NOT_IN_PLAN = "Plan mode is not on, so there is nothing to approve: carry on with the task."


class PlanModeNote:
    """Bus subscriber: a prompt in plan mode carries PLAN_NOTE; the first prompt after it, PLAN_OFF_NOTE."""

    def __init__(self, mode: Callable[[], str], note: str = PLAN_NOTE) -> None:
        self.mode, self.note = mode, note
        self.announced = False

    def __call__(self, e: ev.Event) -> ev.Decision | None:
        if not isinstance(e, ev.UserPromptSubmit):
            return None
        if self.mode() == "plan":
            self.announced = True
            return ev.Decision(additional_context=self.note)
        if self.announced:
            self.announced = False
            return ev.Decision(additional_context=PLAN_OFF_NOTE)
        return None


def headless_exit_plan(agent: Any) -> Callable[[str], ToolResult]:
    """ExitPlanMode without a user: the plan ends the run and is printed as its result."""
    def exit_plan(plan: str) -> ToolResult:
        if agent.permissions is None or agent.permissions.mode != "plan":
            return ToolResult(NOT_IN_PLAN)
        return ToolResult("The plan is shown to the user. This is a non-interactive run, so it ends here; the "
                          "user can continue the session outside plan mode to carry the plan out.",
                          data={"plan": plan, "end_run": plan})
    return exit_plan


def interactive_exit_plan(controller: Any) -> Callable[[str], ToolResult]:
    """ExitPlanMode in the TUI or plain mode: ask the user (controller is agent.session.core.SessionCore)."""
    def exit_plan(plan: str) -> ToolResult:
        if controller.mode != "plan":
            return ToolResult(NOT_IN_PLAN)
        controller.agent.emit(ev.Notification(message="The agent needs your approval for its plan",
                                              notification_type="permission_prompt"))
        reason = (f"The agent's plan:\n\n{plan}\n\nApprove it to leave plan mode (edits will ask first), "
                  "or say what to change.")
        answer = controller.ask(PermissionRequest("ExitPlanMode", {"plan": plan}, reason, []))
        if answer.choice == "deny":
            said = f" The user says: {answer.feedback.strip()}" if answer.feedback.strip() else ""
            return ToolResult(f"The user did not approve the plan; plan mode is still on.{said} Revise the plan "
                              "and call ExitPlanMode again.", is_error=True)
        mode = "acceptEdits" if answer.choice == "always" else "default"
        controller.set_mode(mode)
        return ToolResult(f"The user approved the plan. Plan mode is off (mode: {mode}); carry out the plan now.",
                          data={"plan": plan, "mode": mode})
    return exit_plan


def child_exit_plan(plan: str) -> ToolResult:
    return ToolResult("Error: a subagent cannot leave plan mode or ask the user to approve a plan. Put the plan "
                      "in your final reply; the main agent presents it.", is_error=True)

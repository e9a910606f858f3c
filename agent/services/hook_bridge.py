"""The EventBus subscriber that runs the user's command hooks (hooks.runner) and returns their decisions."""
from __future__ import annotations

import sys
from typing import Callable

from agent.core import events as ev
from hooks.runner import HookOutcome, HookRunner


class HookBridge:
    """Maps loop events to hook payloads (FORMATS.md, Hooks) and hook outcomes to Decisions."""

    def __init__(self, runner: HookRunner, permission_mode: str,
                 notify: Callable[[str], None] | None = None) -> None:
        self.runner = runner
        self.permission_mode = permission_mode  # the TUI updates it when the user switches modes
        self.notify = notify or (lambda text: print(f"agent: {text}", file=sys.stderr))

    def __call__(self, e: ev.Event) -> ev.Decision | None:
        found = self._payload(e)
        if found is None:
            return None
        name, payload = found
        if not self.runner.has_hooks(name):
            return None
        outcome = self.runner.run(name, payload, permission_mode=self.permission_mode)
        for err in outcome.errors:
            self.notify(f"{name} {err}")
        for msg in outcome.system_messages:
            self.notify(msg)
        return _decision(name, outcome)

    def _payload(self, e: ev.Event) -> tuple[str, dict] | None:
        if isinstance(e, ev.SessionStart):
            return "SessionStart", {"source": e.source}
        if isinstance(e, ev.UserPromptSubmit):
            return "UserPromptSubmit", {"prompt": e.prompt}
        if isinstance(e, ev.PreToolUse):
            return "PreToolUse", {"tool_name": e.tool_name, "tool_input": e.tool_input, "tool_use_id": e.tool_use_id}
        if isinstance(e, ev.PostToolUse):
            r = e.tool_response
            response = {**r.data, "content": r.content, "is_error": r.is_error}
            return "PostToolUse", {"tool_name": e.tool_name, "tool_input": e.tool_input,
                                   "tool_use_id": e.tool_use_id, "tool_response": response}
        if isinstance(e, ev.Stop):
            return "Stop", {"stop_hook_active": e.stop_hook_active}
        if isinstance(e, ev.SubagentStop):
            child = {"agent_id": e.agent_id, "agent_transcript_path": e.agent_transcript_path} if e.agent_id else {}
            return "SubagentStop", {"stop_hook_active": e.stop_hook_active, **child}
        if isinstance(e, ev.Notification):
            return "Notification", {"message": e.message, "notification_type": e.notification_type}
        if isinstance(e, ev.PreCompact):
            return "PreCompact", {"trigger": e.trigger, "custom_instructions": e.custom_instructions}
        if isinstance(e, ev.SessionEnd):
            return "SessionEnd", {"reason": e.reason}
        return None


def _decision(event: str, o: HookOutcome) -> ev.Decision:
    if event == "PreToolUse":
        behavior, reason = o.permission_decision, o.permission_reason or o.reason or ""
    else:
        behavior, reason = ("block" if o.blocked else None), o.reason or ""
    return ev.Decision(behavior=behavior, reason=reason, updated_input=o.updated_input,
                       additional_context=o.additional_context or "", stop_session=not o.continue_session,
                       stop_reason=o.stop_reason or "", system_message="\n".join(o.system_messages))

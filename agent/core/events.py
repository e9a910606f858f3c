"""Typed events the loop emits, the decisions blocking events return, and the bus between them.

Subscribers (the headless printer, the session recorder, the hook runner, the TUI bridge) are
callables `fn(event) -> Decision | None`. Only blocking events (UserPromptSubmit, PreToolUse,
PostToolUse, Stop, SubagentStop) read the returned decisions; the bus merges them:
deny > ask > allow for PreToolUse, any "block" blocks, contexts are concatenated.
"""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from runtime.api import Usage
from tools.base import ToolResult


@dataclass(kw_only=True)
class Event:
    session_id: str = ""


@dataclass(kw_only=True)
class SessionStart(Event):
    source: str  # "startup" | "resume" | "clear" | "compact", as Claude Code's hooks expect
    cwd: str
    transcript_path: str
    permission_mode: str
    model: str
    tools: list[str]


@dataclass(kw_only=True)
class UserPromptSubmit(Event):
    prompt: str


@dataclass(kw_only=True)
class PreToolUse(Event):
    tool_name: str
    tool_input: dict
    tool_use_id: str


@dataclass(kw_only=True)
class PostToolUse(Event):
    tool_name: str
    tool_input: dict
    tool_use_id: str
    tool_response: ToolResult


@dataclass(kw_only=True)
class TextDelta(Event):
    text: str


@dataclass(kw_only=True)
class EngineProgress(Event):
    """Model load or long prefill progress from the engine, for UIs."""
    what: str
    done: int
    total: int


@dataclass(kw_only=True)
class AssistantTurn(Event):
    """One engine call finished; `message` is exactly what was appended to the history."""
    message: dict
    turn: int
    stop_reason: str
    usage: Usage


@dataclass(kw_only=True)
class ToolResultEvent(Event):
    """A tool message was appended (run, refused, malformed or interrupted)."""
    tool_use_id: str
    tool_name: str
    tool_input: dict
    result: ToolResult


@dataclass(kw_only=True)
class TurnUsage(Event):
    turn: int
    usage: Usage


@dataclass(kw_only=True)
class Stop(Event):
    stop_hook_active: bool  # True when a Stop decision already sent the model back this run
    last_message: str


@dataclass(kw_only=True)
class SubagentStop(Event):
    stop_hook_active: bool
    last_message: str
    agent_id: str = ""  # the child's session id
    agent_transcript_path: str = ""  # the child's transcript (beside the parent's)


@dataclass(kw_only=True)
class PipelineStep(Event):
    """A step of a small model's task pipeline (agent/pipeline): localize, edit, check, retry, answer."""
    step: str
    detail: str


@dataclass(kw_only=True)
class Notification(Event):
    """Something waits for the user: a permission prompt, a plan to approve."""
    message: str
    notification_type: str = "permission_prompt"


@dataclass(kw_only=True)
class PreCompact(Event):
    trigger: str  # "manual" | "auto"
    custom_instructions: str = ""


@dataclass(kw_only=True)
class SessionEnd(Event):
    reason: str  # "exit" | "interrupted" | "error" | "clear" | "other"


@dataclass
class Decision:
    """What a subscriber answers to a blocking event; None fields mean "no opinion"."""
    behavior: str | None = None  # PreToolUse: "allow" | "deny" | "ask"; others: "block"
    reason: str = ""
    updated_input: dict | None = None  # PreToolUse only
    additional_context: str = ""  # UserPromptSubmit, PostToolUse, SessionStart
    stop_session: bool = False  # a hook's `"continue": false`
    stop_reason: str = ""
    system_message: str = ""  # shown to the user, not the model

    def __post_init__(self) -> None:
        assert self.behavior in (None, "allow", "deny", "ask", "block"), self.behavior


_RANK = {None: 0, "allow": 1, "ask": 2, "block": 3, "deny": 3}


def merge(decisions: list[Decision]) -> Decision:
    """One decision from many: the strongest behavior wins (deny > ask > allow), texts join."""
    out = Decision()
    for d in decisions:
        if _RANK[d.behavior] > _RANK[out.behavior]:
            out.behavior, out.reason = d.behavior, d.reason
        elif d.behavior == out.behavior and d.reason and d.reason not in out.reason:
            out.reason = f"{out.reason}\n{d.reason}".strip()
        if d.updated_input is not None:
            out.updated_input = d.updated_input
        out.additional_context = "\n".join(x for x in (out.additional_context, d.additional_context) if x)
        out.system_message = "\n".join(x for x in (out.system_message, d.system_message) if x)
        if d.stop_session:
            out.stop_session, out.stop_reason = True, d.stop_reason or out.stop_reason
    return out


Subscriber = Callable[[Event], "Decision | None"]


@dataclass
class EventBus:
    """Delivers events to subscribers in subscription order; a failing subscriber is reported, not fatal."""
    subscribers: list[Subscriber] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)  # a subscriber may emit in turn

    def subscribe(self, fn: Subscriber) -> Subscriber:
        self.subscribers.append(fn)
        return fn

    def unsubscribe(self, fn: Subscriber) -> None:
        self.subscribers.remove(fn)

    def emit(self, event: Event) -> Decision:
        """Send `event` to every subscriber; the merged decision (empty for non-blocking events)."""
        decisions: list[Decision] = []
        # Tool threads may emit concurrently; subscribers (printers, recorders) expect one at a time.
        with self._lock:
            for fn in list(self.subscribers):
                try:
                    d: Any = fn(event)
                except Exception as e:  # a broken UI or hook runner must not kill the session
                    msg = f"{type(event).__name__} subscriber {getattr(fn, '__qualname__', fn)!s} failed: {type(e).__name__}: {e}"
                    self.errors.append(msg)
                    print(f"agent: {msg}", file=sys.stderr)
                    continue
                if isinstance(d, Decision):
                    decisions.append(d)
        return merge(decisions)

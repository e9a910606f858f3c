"""Subagents: the Task tool's runner, and a child's permissions (its parent's, narrowed, never widened).

A child is an Agent of its own: a fresh session whose transcript sits beside the parent's, at
`<parent transcript without .jsonl>/subagents/<child id>.jsonl` (Claude Code's layout; a meta line
names the parent), a fresh ToolContext (nothing read, no todos), the parent's engine, approver
and loop limits (no wall-clock timer of its own: the parent's timer and cancel event cover it),
and the tools its definition allows, in the parent's order. Only its final reply comes back.

Prompt layout, for the KV cache: the child's system message is the parent's, byte for byte, and
its tools keep the parent's order, so its prompt shares the parent's cached prefix up to the first
tool it lacks (all of system + tools for general-purpose). The definition's prompt opens the
child's first user message, after the memory, index and env blocks the parent's first message
also starts with. On an engine that can fork (the local engine), the child's first call copies
exactly that common prefix from the parent's KV cache (fork_session) instead of prefilling it.

Permissions: ChildPermissions denies tools outside the child's allowlist, then asks a view of the
parent's live permissions (same rules, same mode; a definition's permissionMode counts only when it
is narrower). So a child of a plan-mode parent is read-only, no child gains bypass, and a child
never approves a plan (its ExitPlanMode is refused).

Hooks: the child's PreToolUse/PostToolUse/Notification go to the session's hook runner as the
parent's do (a guard hook holds inside subagents); its Stop becomes SubagentStop (with agent_id and
agent_transcript_path). UserPromptSubmit, SessionStart and SessionEnd do not fire for children.

Limits: depth (the main agent is depth 0; a child at max_depth cannot start another) and
concurrency (max_concurrent children at once in the whole tree). The main agent waits for a free
slot; a child, which holds a slot, is refused instead of waiting, so nested calls cannot deadlock.
Permission prompts from concurrent children are asked one at a time.
"""
from __future__ import annotations

import copy
import dataclasses
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from agent.core import events as ev
from agent.core.model_text import subagent_prompt
from agent.core.results import result_object
from agent.services.hook_bridge import HookBridge
from agent.core.loop import Agent, Approval
from agent.core.permissions import Decision, _parse_rule
from agent.core.transcript import TRANSCRIPT_VERSION, Session
from hooks.settings import SourcedRule
from runtime.api import Request
from skills.agent_defs import find_agent
from tools.base import ToolContext, ToolResult

# Narrowest last: a definition's permissionMode is used only when it ranks above the parent's.
MODE_RANK = {"bypassPermissions": 0, "acceptEdits": 1, "default": 2, "dontAsk": 3, "plan": 4}


@dataclass
class SubagentConfig:
    max_depth: int = 2  # the main agent is depth 0; children at depth max_depth cannot start more
    max_concurrent: int = 4  # children running at once in the whole tree

    def __post_init__(self) -> None:
        assert self.max_depth >= 0 and self.max_concurrent >= 1

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "SubagentConfig":
        """AGENT_SUBAGENT_MAX_DEPTH / AGENT_SUBAGENT_MAX_CONCURRENT; bad values raise ValueError (one line)."""
        out = cls()
        for name, attr, low in (("AGENT_SUBAGENT_MAX_DEPTH", "max_depth", 0),
                                ("AGENT_SUBAGENT_MAX_CONCURRENT", "max_concurrent", 1)):
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            if not raw.strip().isdigit() or int(raw) < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {raw!r}")
            setattr(out, attr, int(raw))
        return out


def narrower_mode(parent: str, requested: str | None) -> str:
    """The child's mode: the parent's, or the requested one when it is narrower."""
    if requested in MODE_RANK and MODE_RANK[requested] > MODE_RANK.get(parent, 2):
        return requested
    return parent


class ChildPermissions:
    """A child's permission checks: its allowlist, then its parent's live rules and mode (narrowed)."""

    def __init__(self, parent: Any, tools: frozenset[str] | None, requested_mode: str | None = None) -> None:
        self.parent = parent  # a Permissions, a ChildPermissions, or None (no checks configured)
        self.tools = tools  # tool names the child may call; None = any its parent may
        self.requested_mode = requested_mode
        self.rules: dict[str, list] = {"allow": [], "ask": [], "deny": []}  # the child's own grants

    @property
    def mode(self) -> str:
        return narrower_mode(self.parent.mode if self.parent is not None else "default", self.requested_mode)

    def add_rule(self, rule: str, behavior: str = "allow", source: str = "session") -> None:
        self.rules[behavior].append(_parse_rule(SourcedRule(rule, source)))

    def view(self) -> Any:
        """A Permissions with the parent's rules plus the child's grants, in the child's mode."""
        base = self.parent.view() if isinstance(self.parent, ChildPermissions) else self.parent
        if base is None:
            return None
        view = copy.copy(base)
        view.rules = {k: [*base.rules[k], *self.rules.get(k, [])] for k in base.rules}
        view.mode = self.mode
        return view

    def check(self, tool_name: str, args: dict, read_only: bool, *, cwd: Path | None = None) -> Decision:
        if self.tools is not None and tool_name not in self.tools:
            return Decision("deny", f"{tool_name} is not one of this subagent's tools "
                                    f"({', '.join(sorted(self.tools)) or 'none'}).")
        view = self.view()
        if view is None:
            return Decision("allow", "No permission checks are configured.")
        return view.check(tool_name, args, read_only, cwd=cwd)

    def suggest_rule(self, tool_name: str, args: dict, *, cwd: Path | None = None) -> list[str]:
        view = self.view()
        return view.suggest_rule(tool_name, args, cwd=cwd) if view is not None else []


class _Slots:
    """Children running at once in one tree, and one permission prompt at a time among them."""

    def __init__(self, n: int) -> None:
        self.semaphore = threading.BoundedSemaphore(n)
        self.asking = threading.RLock()  # re-entrant: a grandchild's approver wraps its parent's

    def acquire(self, wait: bool, cancel: threading.Event) -> bool:
        if not wait:
            return self.semaphore.acquire(blocking=False)
        while not cancel.is_set():
            if self.semaphore.acquire(timeout=0.05):
                return True
        return False

    def release(self) -> None:
        self.semaphore.release()


class _ForkOnFirstCall:
    """The parent's engine for one child: its first call starts from the parent's cached prefix."""

    def __init__(self, engine: Any, parent_id: str, child_id: str) -> None:
        self.engine, self.parent_id, self.child_id = engine, parent_id, child_id
        self.forked_tokens: int | None = None  # tokens copied from the parent's KV cache

    def __getattr__(self, name: str) -> Any:  # name, context_window, count_tokens, ...
        return getattr(self.engine, name)

    def stream(self, request: Request, *, cancel: threading.Event | None = None):
        if self.forked_tokens is None:
            self.forked_tokens = fork_prefix(self.engine, self.parent_id, self.child_id, request)
        return self.engine.stream(request, cancel=cancel)


def fork_prefix(engine: Any, parent_id: str, child_id: str, request: Request) -> int:
    """Start `child_id` with the KV of the tokens its first prompt shares with the parent's session.

    Engines without fork_session (scripted, openai) start the child from nothing: 0. When the engine
    cannot say the common prefix (no builder/session_tokens), the whole parent cache is copied and
    the engine's own longest-common-prefix reuse keeps what matches.
    """
    fork = getattr(engine, "fork_session", None)
    if fork is None:
        return 0
    shared = None
    builder, session_tokens = getattr(engine, "builder", None), getattr(engine, "session_tokens", None)
    if builder is not None and session_tokens is not None:
        try:
            child = builder.render_tokens(request.messages, request.tools, True)
            parent = session_tokens(parent_id)
            shared = next((i for i, (a, b) in enumerate(zip(parent, child)) if a != b), min(len(parent), len(child)))
            shared = min(shared, len(child) - 1)  # the last prompt token is always computed
        except Exception:  # a template quirk must not stop the child: fall back to a whole copy
            shared = None
    for n in (shared, None):
        try:
            return fork(parent_id, child_id, n)
        except Exception:  # e.g. the conversation tokens run past what the cache holds
            continue
    return 0


def _hook_relay(hooks: Callable[[ev.Event], Any], agent_id: str, transcript: Path):
    """Child bus subscriber: its tool events reach the session's hooks; its Stop is SubagentStop."""
    def relay(e: ev.Event) -> Any:
        if isinstance(e, ev.Stop):
            return hooks(ev.SubagentStop(stop_hook_active=e.stop_hook_active, last_message=e.last_message,
                                         agent_id=agent_id, agent_transcript_path=str(transcript),
                                         session_id=e.session_id))
        if isinstance(e, (ev.PreToolUse, ev.PostToolUse, ev.Notification, ev.PreCompact)):
            return hooks(e)
        return None
    return relay


def session_hooks(bus: ev.EventBus) -> Callable[[ev.Event], ev.Decision]:
    """The hook runners subscribed to the main agent's bus (looked up at each event), as one callable."""

    def dispatch(e: ev.Event) -> ev.Decision:
        bridges = [s for s in list(bus.subscribers) if isinstance(s, HookBridge)]
        return ev.merge([d for d in (b(e) for b in bridges) if isinstance(d, ev.Decision)])
    return dispatch


class SubagentRunner:
    """The Task service of one agent: starts, runs and reports its children."""

    def __init__(self, agent: Agent, harness: Any, attach: Callable[..., None], *, depth: int = 0,
                 parent: "SubagentRunner | None" = None) -> None:
        """attach: how a child gets its harness (agent.harness.harness.attach_harness, which makes this runner)."""
        self.agent, self.harness, self.attach, self.depth = agent, harness, attach, depth
        self.config = harness.subagents
        self.slots: _Slots = parent.slots if parent else _Slots(self.config.max_concurrent)
        self.hooks = parent.hooks if parent else session_hooks(agent.bus)
        self.children: list[dict] = []  # what each finished child reported (for tests and UIs)

    def run(self, description: str, prompt: str, subagent_type: str) -> ToolResult:
        self.harness.refresh()
        definition = find_agent(self.harness.agents, subagent_type.strip())
        if definition is None:
            names = ", ".join(a.name for a in self.harness.agents)
            return _error(f"Error: there is no subagent type {subagent_type!r}. Available: {names}.")
        if not prompt.strip():
            return _error("Error: the prompt is empty; say what the subagent should do.")
        if self.depth >= self.config.max_depth:
            return _error(f"Error: subagents cannot be nested more than {self.config.max_depth} deep; "
                          "do this part yourself.")
        cancel = self.agent.ctx.cancel
        if not self.slots.acquire(wait=self.depth == 0, cancel=cancel):
            if cancel.is_set():
                return _error("Not run: the user interrupted the session.")
            return _error(f"Error: {self.config.max_concurrent} subagents are already running (the limit); "
                          "do this part yourself or try again when one has finished.")
        try:
            return self._run_child(definition, description, prompt)
        finally:
            self.slots.release()

    def _run_child(self, definition: Any, description: str, prompt: str) -> ToolResult:
        parent = self.agent
        child_id = f"agent-{uuid.uuid4().hex[:12]}"
        transcript = parent.session.transcript_path.with_suffix("") / "subagents" / f"{child_id}.jsonl"
        session = Session(child_id, transcript)
        session.record({"type": "meta", "session_id": child_id, "cwd": str(parent.ctx.cwd), "created": time.time(),
                        "version": TRANSCRIPT_VERSION, "parent_session_id": parent.session.session_id,
                        "subagent_type": definition.name, "description": description, "depth": self.depth + 1,
                        "model": parent.engine.name})
        tools = self._child_tools(definition)
        names = frozenset(t.name for t in tools)
        engine = _ForkOnFirstCall(parent.engine, parent.session.session_id, child_id)
        bus = ev.EventBus()
        bus.subscribe(session.recorder)
        bus.subscribe(_hook_relay(self.hooks, child_id, transcript))
        # The parent's shells and output dir: what a child starts is the parent session's to stop at its end.
        child_ctx = ToolContext(cwd=parent.ctx.cwd, env=dict(parent.ctx.env), shells=parent.ctx.shells,
                                output_dir=parent.ctx.output_dir, read_denied=parent.ctx.read_denied)
        child = Agent(engine, tools, session, child_ctx,
                      system_prompt=parent.system_prompt,
                      context=dataclasses.replace(parent.context, shown_todos=[]) if parent.context else None,
                      bus=bus, permissions=ChildPermissions(parent.permissions, names,
                                                            definition.frontmatter.get("permissionMode")),
                      approver=self._approver(), config=dataclasses.replace(parent.config, max_wall_s=None),
                      profile=parent.profile)
        child.driver = parent.driver  # a small model's child runs the same pipeline (stateless, per project)
        self.attach(child, self.harness, depth=self.depth + 1, parent_runner=self)
        started = time.monotonic()
        try:
            result = child.run(subagent_prompt(definition.name, definition.system_prompt, prompt), parent.ctx.cancel)
        finally:
            drop = getattr(parent.engine, "drop_session", None)
            if drop is not None:
                drop(child_id)
        session.record({k: v for k, v in result_object(result, child_id).items() if k != "type"} | {"type": "result"})
        session.close()
        first = result.turn_usage[0] if result.turn_usage else None
        report = {"subagent_type": definition.name, "session_id": child_id, "transcript_path": str(transcript),
                  "stop_reason": result.stop_reason, "num_turns": result.num_turns,
                  "started": started, "finished": time.monotonic(),
                  "kv_forked_tokens": engine.forked_tokens or 0,
                  "first_call": {"prompt_tokens": first.prompt_tokens, "reused_tokens": first.reused_tokens,
                                 "prefilled_tokens": first.prefilled_tokens} if first else None}
        self.children.append(report)
        if result.is_error:
            last = next((m["content"].strip() for m in reversed(session.messages)
                         if m["role"] == "assistant" and (m.get("content") or "").strip()), "")
            said = f" Its last message: {last}" if last else ""
            return ToolResult(f"Error: the {definition.name} subagent stopped early ({result.stop_reason}: "
                              f"{result.error or 'no details'}).{said}", is_error=True, data=report)
        return ToolResult(result.text.strip() or "(the subagent finished without a report)", data=report)

    def _child_tools(self, definition: Any) -> list:
        """The parent's tools (in order) that the definition names; all of them when it names none."""
        if definition.tools is None:
            return list(self.agent.tools.values())
        wanted = {t.split("(", 1)[0].strip() for t in definition.tools}
        return [t for t in self.agent.tools.values() if t.name in wanted]

    def _approver(self) -> Callable[[str, dict, str], Approval] | None:
        """The parent's approver, one prompt at a time across concurrent children."""
        approver = self.agent.approver
        if approver is None:
            return None

        def ask(tool_name: str, tool_input: dict, reason: str) -> Approval:
            with self.slots.asking:
                return approver(tool_name, tool_input, reason)
        return ask


def _error(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)

"""SessionCore: the one thing a client talks to. The TUI, plain mode and headless runs are its clients.

A client submits a prompt (run, on its worker thread), answers permission requests (the `ask`
callback it installs), interrupts (the cancel event it passes) and consumes typed events (subscribe).
"Always allow" stores the suggested rules for exactly the parts the user saw, in
`.agent/settings.local.json` and in the live rule set. Nothing here prints or knows a terminal.
Sessions are assembled by agent.session.builder.build_session.
"""
from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path
from typing import Any, Callable

from hooks.settings import add_allow_rule

from agent.core import events as ev
from agent.core import model_text as mt
from agent.core.approval import PermissionAnswer, PermissionRequest, preview_diff
from agent.core.loop import Agent, Approval, RunResult
from agent.core.results import result_object
from agent.core.transcript import Session, find_session
from agent.paths import project_sessions_dir
from agent.services.checkpoint_recorder import rewind
from agent.services.checkpoints import CheckpointError
from agent.services.compaction import ContextCompacted
from agent.session.assembly import attach_hooks, make_permissions
from agent.session.options import SessionOptions
from agent.session.status import StatusInfo, git_branch, home_relative
from agent.settings import Environment, Settings
from runtime.api import Usage
from tools.read import ReadTool

MODE_CYCLE = ("default", "acceptEdits", "plan")  # what Shift+Tab steps through
OUTPUT_RULE_SOURCE = "Bash output dir"  # the session rule that lets Read open Bash's saved outputs
MENTION = re.compile(r"(?<![\w@])@((?:[\w.~/-]|\\ )+)")  # `@src/app.py` in a prompt


class SessionCore:
    """One session: the Agent and everything around it (built by build_session)."""

    def __init__(self, options: SessionOptions, environment: Environment, settings: Settings, agent: Agent, *,
                 notify: Callable[[str], None], modes: tuple[str, ...] = MODE_CYCLE) -> None:
        self.options, self.environment, self.settings, self.agent = options, environment, settings, agent
        self.project = options.project
        self.engine = agent.engine
        self.ctx = agent.ctx
        self.permissions = agent.permissions
        self.tools = list(agent.tools.values())
        self.notify = notify
        self.modes = modes
        self.ask: Callable[[PermissionRequest], PermissionAnswer] = lambda req: PermissionAnswer(
            "deny", "nobody is there to approve it")
        self.hooks = self.hook_bridge = self.harness = self.services = None  # set by the builder
        self.mcp = None  # McpHub, when MCP servers are configured (set by the builder)
        self.totals = Usage()  # every engine call of this process
        self.turns = 0
        self.last_usage: Usage | None = None
        self.branch = git_branch(self.project)
        self.config_generation = 0  # bumped when settings, hooks, skills, agents or commands are reloaded
        self.config_listeners: list[Callable[[set[str]], None]] = []  # e.g. skill and subagent indexes
        self._start_source: str | None = "resume" if agent.session.messages else "startup"
        self.import_answers: dict[Path, bool] = {}  # memory imports from outside the project, as the user answered
        agent.bus.subscribe(self._record)
        agent.bus.subscribe(self._count)

    def subscribe(self, handler: Callable[[ev.Event], Any]) -> None:
        """Receive every event of the session (typed, agent.core.events)."""
        self.agent.bus.subscribe(handler)

    # ---- state

    @property
    def session(self) -> Session:
        return self.agent.session

    @property
    def mode(self) -> str:
        return self.permissions.mode

    def set_mode(self, mode: str) -> None:
        self.permissions.set_mode(mode)
        if self.hook_bridge is not None:
            self.hook_bridge.permission_mode = mode

    def cycle_mode(self) -> str:
        """default -> acceptEdits -> plan (-> bypassPermissions when started in it) -> default."""
        i = self.modes.index(self.mode) if self.mode in self.modes else -1
        self.set_mode(self.modes[(i + 1) % len(self.modes)])
        return self.mode

    def status(self) -> StatusInfo:
        u = self.last_usage
        return StatusInfo(
            model=self.engine.name, mode=self.mode,
            context_used=(u.prompt_tokens + u.generated_tokens) if u else 0, context_limit=getattr(self.engine, "context_window", None),
            reuse_pct=100 * u.reused_tokens / u.prompt_tokens if u and u.prompt_tokens else None,
            ttft_s=u.ttft_s if u else None, decode_tps=u.decode_tps if u else None,
            spec_accept_pct=100 * u.accepted_tokens / u.drafted_tokens if u and u.drafted_tokens else None,
            cwd=home_relative(self.project), branch=self.branch, shells=len(self.ctx.shells.running()))

    # ---- running

    def start(self) -> None:
        """The SessionStart event, once per session (and after /clear or /resume), before its first prompt."""
        if self._start_source:
            start = ev.SessionStart(source=self._start_source, cwd=str(self.project),
                                    transcript_path=str(self.session.transcript_path), permission_mode=self.mode,
                                    model=self.engine.name, tools=list(self.agent.tools))
            self.agent.pending_context = self.agent.emit(start).additional_context
            self._start_source = None

    def offer_mcp_tools(self) -> None:
        """Tools of MCP servers connected since the last prompt join the offered list (headless: wait for them)."""
        if self.mcp is None:
            return
        if self.options.headless:
            self.mcp.manager.wait()
        added = self.mcp.adopt(self.agent)
        if added:
            self.notify(f"MCP tools offered: {', '.join(t.name for t in added)}")

    def run(self, prompt: str, cancel: threading.Event) -> RunResult:
        """One prompt to its end on this thread; `@file` mentions are attached first."""
        self.offer_mcp_tools()
        self.start()
        result = self.agent.run(self.attach_mentions(prompt), cancel)
        obj = result_object(result, self.session.session_id)
        self.session.record({k: v for k, v in obj.items() if k != "type"} | {"type": "result"})
        self.branch = git_branch(self.project)
        return result

    def attach_mentions(self, prompt: str) -> str:
        """Append each `@path` file that exists, read with the Read tool (so it counts as read for Edit)."""
        blocks, seen = [], set()
        for m in MENTION.finditer(prompt):
            name = m.group(1).replace("\\ ", " ").rstrip(".,;:)")
            path = self.ctx.resolve(name)
            if path in seen or not path.is_file():
                continue
            seen.add(path)
            result = ReadTool().run({"file_path": str(path)}, self.ctx)
            blocks.append(mt.attached_file(name, result.content))
        return "\n\n".join([prompt, *blocks]) if blocks else prompt

    def approve(self, tool_name: str, tool_input: dict, reason: str) -> Approval:
        """The Agent's approver: the client's `ask` answers a PermissionRequest."""
        rules = self.permissions.suggest_rule(tool_name, tool_input, cwd=self.ctx.shell_cwd or self.ctx.cwd)
        preview = preview_diff(tool_name, tool_input, self.ctx.resolve(str(tool_input.get("file_path", "."))))
        self.agent.emit(ev.Notification(message=f"The agent needs your permission to use {tool_name}"))
        answer = self.ask(PermissionRequest(tool_name, tool_input, reason, rules, preview))
        if answer.choice == "always":
            self.allow_always(rules)
        if answer.choice in ("once", "always"):
            return Approval(True)
        said = f" The user says: {answer.feedback.strip()}" if answer.feedback.strip() else ""
        return Approval(False, f"the user declined it.{said}")

    def approve_import(self, path: Path) -> bool:
        """A memory file imports `path` from outside the project and the memory dirs: the user decides, once
        per path and session."""
        if path not in self.import_answers:
            reason = (f"A memory file (AGENTS.md/CLAUDE.md) imports {path}, which is outside the project and the "
                      "memory directories; its text would go into the model's context.")
            answer = self.ask(PermissionRequest("Read", {"file_path": str(path)}, reason, []))
            self.import_answers[path] = answer.choice in ("once", "always")
        return self.import_answers[path]

    def allow_always(self, rules: list[str]) -> None:
        """Store each rule in .agent/settings.local.json and apply it to this session at once."""
        for rule in rules:
            self.permissions.add_rule(rule, "allow", "session")
            try:
                add_allow_rule(self.project, rule)
            except ValueError as e:
                self.notify(str(e))

    def _count(self, event: ev.Event) -> None:
        if isinstance(event, ev.TurnUsage):
            self.totals = self.totals.add(event.usage)
            self.turns += 1
            self.last_usage = event.usage
        elif isinstance(event, ContextCompacted):  # the summary call was real work; the context is smaller now
            self.totals = self.totals.add(event.report.summary_usage)
            self.last_usage = Usage(prompt_tokens=event.report.tokens_after)

    def _record(self, event: ev.Event) -> None:
        # The session may be replaced (/clear, /resume), so look it up at each event.
        self.agent.session.recorder(event)

    # ---- context, checkpoints, configuration

    def compact(self, focus: str = "", cancel: threading.Event | None = None):
        """/compact [focus]: the conversation becomes a state block now; CompactionError when it cannot."""
        return self.services.guard.compact(trigger="manual", focus=focus, cancel=cancel or threading.Event())

    def checkpoints(self) -> list:
        """This session's checkpoints, newest first."""
        return self.services.checkpoints.list() if self.services.checkpoints else []

    def rewind(self, checkpoint_id: str, what: str = "both"):
        """/rewind ID [both|code|conversation]; CheckpointError (one line) when it cannot."""
        if self.services.checkpoints is None:
            raise CheckpointError("checkpoints are off in this session")
        outcome = rewind(self.agent, self.services.checkpoints.checkpoints, checkpoint_id, what)
        self.last_usage = None
        return outcome

    def config_changed(self, paths: set[str]) -> None:
        """Settings, hooks, skills, agents or commands changed on disk: re-read permissions, env and hooks;
        skills and commands are re-discovered by their users on the next look (config_generation)."""
        settings = Settings.load(self.project, self.environment.locations,
                                 compact_at=self.options.auto_compact_threshold)
        for w in settings.warnings:
            self.notify(w)
        lost = [p for p in self.settings.sources if p not in settings.sources and p.exists()]
        if lost:  # a file read before is broken now (a half-saved edit): its rules must not vanish mid-session
            self.notify(f"Configuration not reloaded: {lost[0]} cannot be read now; the previous settings stay "
                        "in force until it is fixed.")
            return
        fresh = make_permissions(settings, self.mode, self.project, self.options.allowed, self.options.disallowed,
                                 self.permissions.sandbox)
        granted = {b: [r for r in rules if r.source in ("session", OUTPUT_RULE_SOURCE)]
                   for b, rules in self.permissions.rules.items()}
        self.permissions.rules = {b: fresh.rules[b] + granted.get(b, []) for b in fresh.rules}
        self.permissions.dirs = fresh.dirs
        self.ctx.env.clear()
        self.ctx.env.update(settings.env)
        self.settings = settings
        if self.hook_bridge is not None:
            self.agent.bus.unsubscribe(self.hook_bridge)
        self.hooks, self.hook_bridge = attach_hooks(self.agent, settings, self.project, self.mode, self.notify)
        self.config_generation += 1
        for listener in list(self.config_listeners):
            listener(paths)
        self.notify(f"Configuration reloaded ({_names(paths, self.project)}).")

    # ---- sessions

    def clear(self) -> None:
        """Start a fresh session (the old transcript stays on disk)."""
        self._switch(Session.create(self.project, {"model": self.engine.name, "engine": self.options.engine}), "clear")

    def resume(self, session_id: str) -> None:
        session = Session.load(find_session(session_id, self.project))
        for w in session.warnings:
            self.notify(f"warning: {w}")
        self.warm_start(session)
        self._switch(session, "resume")

    def warm_start(self, session: Session) -> None:
        """Load the session's saved KV cache, if the engine keeps one (it checks that it matches)."""
        kv_path = session.transcript_path.with_suffix(".kv")
        if session.messages and kv_path.exists() and keeps_kv(self.engine):
            self.engine.load_session(session.session_id, kv_path)

    def _switch(self, session: Session, source: str) -> None:
        old = self.agent.session
        self.agent.emit(ev.SessionEnd(reason="clear" if source == "clear" else "other"))
        self.save_kv(old)
        old.close()
        self.agent.session = session
        self.ctx.todos[:] = session.last_todos()
        self.ctx.read_files.clear()
        self.ctx.shell_cwd = None
        if self.agent.context is not None:
            self.agent.context.shown_todos = []
        if self.hooks is not None:
            self.hooks.session_id, self.hooks.transcript_path = session.session_id, str(session.transcript_path)
        self.last_usage = None
        self._start_source = source

    def list_sessions(self, limit: int = 10) -> list[tuple[str, float, str]]:
        """(session id, last write time, first prompt) of this project's recent sessions, newest first."""
        d = project_sessions_dir(self.project)
        paths = sorted(d.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns, reverse=True) if d.is_dir() else []
        out = []
        for p in paths[:limit]:
            messages = Session.load(p).messages
            first = next((mt.user_text(m["content"]) for m in messages if m.get("role") == "user"), "")
            out.append((p.stem, p.stat().st_mtime, " ".join(first.split())[:80]))
        return out

    def close(self, reason: str = "exit") -> None:
        self.services.close()
        self.close_mcp()
        self.agent.emit(ev.SessionEnd(reason=reason))
        self.stop_processes()
        self.save_kv(self.session)
        self.session.close()

    def close_mcp(self) -> None:
        """Stop the MCP servers (stdio processes end with their sessions)."""
        if self.mcp is not None:
            self.mcp.close()

    def stop_processes(self) -> int:
        """Session end: stop the background shells and the groups commands left running, remove saved outputs.
        Returns how many process groups were still running."""
        stopped = self.ctx.shells.stop_all()
        if self.ctx.output_dir is not None:
            shutil.rmtree(self.ctx.output_dir, ignore_errors=True)
        return stopped

    def save_kv(self, session: Session) -> bool:
        """Save the session's KV cache beside its transcript for a warm --continue/--resume."""
        if not (keeps_kv(self.engine) and session.messages):
            return False
        try:
            return bool(self.engine.save_session(session.session_id, session.transcript_path.with_suffix(".kv")))
        except Exception as e:  # a failed warm-start file is not worth losing the exit over
            self.notify(f"could not save the KV cache: {type(e).__name__}: {e}")
            return False


def keeps_kv(engine: Any) -> bool:
    """Whether the engine can save and load a session's KV cache (the in-process one)."""
    return callable(getattr(engine, "save_session", None)) and callable(getattr(engine, "load_session", None))


def _names(paths: set[str], project: Path) -> str:
    shown = []
    for p in sorted(paths):
        try:
            shown.append(str(Path(p).relative_to(project)))
        except ValueError:
            shown.append(p)
    return ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")

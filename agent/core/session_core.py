"""The interactive session core that the TUI and plain mode drive (two clients, one core).

It builds what `agent -p` builds (settings, tools, permissions, engine, session, hooks) from
InteractiveOptions, then runs one prompt at a time on the caller's (worker) thread. The UI
supplies `ask` to answer permission requests; "always allow" stores the suggested rules for
exactly the parts the user saw, in `.agent/settings.local.json` and in the live rule set.
Everything here is UI-neutral: no printing, no terminal.
"""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from agent.core import events as ev
from agent.services.compaction import ContextCompacted
from agent.core.loop import Agent, Approval, LoopConfig, RunResult
from runtime.api import Progress, Usage

MODE_CYCLE = ("default", "acceptEdits", "plan")  # what Shift+Tab steps through
MENTION = re.compile(r"(?<![\w@])@((?:[\w.~/-]|\\ )+)")  # `@src/app.py` in a prompt


@dataclass
class InteractiveOptions:
    project: Path
    engine: str = "local"
    model: str | None = None
    script: str | None = None
    base_url: str | None = None
    max_turns: int = 50
    max_time: float | None = None
    allowed: list[str] = field(default_factory=list)
    disallowed: list[str] = field(default_factory=list)
    permission_mode: str | None = None
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    continue_: bool = False
    resume: str | None = None
    speculation: bool = True
    constrained_tools: bool = True
    initial_prompt: str | None = None  # `agent "fix the tests"` opens the UI and sends it
    auto_compact_threshold: float | None = None  # share of the context window; None: settings or 0.8

    def __post_init__(self) -> None:
        self.project = Path(self.project).expanduser().resolve()
        assert self.max_turns >= 1, "--max-turns must be at least 1"

    @classmethod
    def from_args(cls, args: Any) -> "InteractiveOptions":
        """From the CLI's argparse namespace (agent.cli.build_parser)."""
        from agent.cli import CliError, split_rules

        project = Path(args.cwd or os.getcwd()).expanduser().resolve()
        if not project.is_dir():
            raise CliError(f"--cwd {project} is not a directory")
        if args.max_turns < 1:
            raise CliError("--max-turns must be at least 1")
        return cls(project=project, engine=args.engine, model=args.model, script=args.script,
                   base_url=args.base_url, max_turns=args.max_turns, max_time=args.max_time,
                   allowed=split_rules(args.allowed), disallowed=split_rules(args.disallowed),
                   permission_mode=args.permission_mode, system_prompt=args.system_prompt,
                   append_system_prompt=args.append_system_prompt, continue_=args.continue_,
                   resume=args.resume, speculation=not args.no_speculation,
                   constrained_tools=not getattr(args, "no_constrained_tools", False), initial_prompt=args.prompt or None,
                   auto_compact_threshold=getattr(args, "auto_compact_threshold", None))


@dataclass
class PermissionRequest:
    tool_name: str
    tool_input: dict
    reason: str  # why it needs approval, from the permission check or a hook
    rules: list[str]  # what "always allow" would store; [] when nothing safe can be suggested
    preview: str | None = None  # Edit/Write/MultiEdit: the change as a unified diff


@dataclass
class PermissionAnswer:
    choice: str  # "once" | "always" | "deny"
    feedback: str = ""  # deny: told to the model

    def __post_init__(self) -> None:
        assert self.choice in ("once", "always", "deny"), self.choice


@dataclass
class StatusInfo:
    model: str
    mode: str
    context_used: int  # tokens in the last prompt plus its reply
    context_limit: int | None
    reuse_pct: float | None  # last engine call: reused / prompt tokens
    ttft_s: float | None
    decode_tps: float | None
    spec_accept_pct: float | None  # accepted / drafted tokens, when anything was drafted
    cwd: str  # ~ for the home directory
    branch: str | None


def format_figures(s: StatusInfo) -> str:
    """Model, context used/limit, and the last engine call's KV reuse, TTFT, decode speed, speculation."""
    limit = f"/{_k(s.context_limit)}" if s.context_limit else ""
    pct = f" ({100 * s.context_used / s.context_limit:.0f}%)" if s.context_limit else ""
    parts = [s.model, f"ctx {_k(s.context_used)}{limit}{pct}"]
    if s.reuse_pct is not None:
        parts.append(f"KV reuse {s.reuse_pct:.0f}%")
    if s.ttft_s:
        parts.append(f"TTFT {s.ttft_s:.2f}s")
    if s.decode_tps:
        parts.append(f"{s.decode_tps:.1f} tok/s")
    if s.spec_accept_pct is not None:
        parts.append(f"spec {s.spec_accept_pct:.0f}%")
    return " · ".join(parts)


def format_place(s: StatusInfo) -> str:
    return s.cwd + (f" ({s.branch})" if s.branch else "")


def format_status(s: StatusInfo) -> str:
    """The whole status on one line (plain mode's toolbar, /status)."""
    return f"{s.mode} · {format_figures(s)} · {format_place(s)}"


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


class Interactive:
    """One interactive session: the Agent and everything around it."""

    def __init__(self, options: InteractiveOptions, engine: Any = None,
                 notify: Callable[[str], None] | None = None,
                 progress: Callable[[Progress], None] | None = None) -> None:
        """notify: one-line messages for the user; progress: model-load progress (local engine)."""
        from agent.cli import CliError, _load_settings, _offered_tools, _permissions, decoding_switches
        from agent.core.context import ContextBuilder, model_parameters, system_prompt, tools_for_model
        from agent.engines import make_engine
        from agent.paths import agent_home, claude_home, repo_root
        from agent.core.permissions import PERMISSION_MODES
        from agent.core.transcript import Session, SessionError, find_session, latest_session
        from tools.base import ToolContext

        self.options = options
        self.project = options.project
        self.notify = notify or (lambda text: None)
        self.ask: Callable[[PermissionRequest], PermissionAnswer] = lambda req: PermissionAnswer(
            "deny", "nobody is there to approve it")
        self.settings = _load_settings(self.project)
        for w in self.settings.warnings:
            self.notify(w)
        mode = options.permission_mode or self.settings.permissions.default_mode or "default"
        if mode not in PERMISSION_MODES:
            raise CliError(f"unknown permission mode {mode!r} in settings; use one of {', '.join(PERMISSION_MODES)}")
        self.modes = MODE_CYCLE + (("bypassPermissions",) if mode == "bypassPermissions" else ())
        self.tools = _offered_tools(options.disallowed + [r.rule for r in self.settings.permissions.deny])
        self.permissions = _permissions(self.settings, mode, self.project, options.allowed, options.disallowed)
        local = {"progress": progress} if options.engine == "local" and progress else {}
        self.engine = engine or make_engine(options.engine, model=options.model or self.settings.model,
                                            script=options.script, base_url=options.base_url, **local)
        # The core set for models under 2B, as headless does. The mode can change during the session and the
        # tool list must stay byte-stable, so ExitPlanMode stays offered (the harness refuses it outside plan mode).
        self.tools = tools_for_model(self.tools, model_parameters(self.engine), "plan")
        try:
            if options.resume:
                session = Session.load(find_session(options.resume, self.project))
            elif options.continue_:
                session = Session.load(latest_session(self.project))
            else:
                session = self._new_session()
        except SessionError as e:
            raise CliError(str(e)) from None
        for w in session.warnings:
            self.notify(f"warning: {w}")
        self.ctx = ToolContext(cwd=self.project, env=dict(self.settings.env), todos=session.last_todos())
        from types import SimpleNamespace
        speculation, constrained = decoding_switches(SimpleNamespace(
            no_speculation=not options.speculation, no_constrained_tools=not options.constrained_tools),
            self.settings.sources)  # flags, then the settings' "speculation" / "constrainedTools"
        config = LoopConfig(max_turns=options.max_turns, max_wall_s=options.max_time,
                            speculation=speculation, constrained_tools=constrained)
        self.agent = Agent(self.engine, self.tools, session, self.ctx,
                           system_prompt=system_prompt(options.system_prompt, options.append_system_prompt),
                           context=ContextBuilder(self.project, repo_root(self.project), agent_home(), claude_home()),
                           permissions=self.permissions, approver=self._approve, config=config)
        self.agent.bus.subscribe(self._record)
        self.agent.bus.subscribe(self._count)
        self.hooks = self._attach_hooks(mode)
        from agent.harness.harness import setup_interactive  # Task, Skill, ExitPlanMode (plan approval asks)
        self.harness = setup_interactive(self)
        self._start_source = "resume" if session.messages else "startup"
        self._warm_start(session)
        self.totals = Usage()  # every engine call of this process
        self.turns = 0
        self.last_usage: Usage | None = None
        self.branch = git_branch(self.project)
        from agent.services.attach import attach_services
        self.config_generation = 0  # bumped when settings, hooks, skills, agents or commands are reloaded
        self.config_listeners: list[Callable[[set[str]], None]] = []  # e.g. skill and subagent indexes
        self.services = attach_services(self.agent, self.project, self.settings, notify=self.notify,
                                        warn=self.notify, compact_threshold=options.auto_compact_threshold,
                                        on_config_change=self._config_changed)

    # ---- construction helpers

    def _new_session(self):
        from agent.core.transcript import Session
        return Session.create(self.project, {"model": self.engine.name, "engine": self.options.engine})

    def _attach_hooks(self, mode: str):
        if not self.settings.hooks:
            return None
        from agent.services.hook_bridge import HookBridge
        from hooks.runner import HookRunner
        config = {event: [{"matcher": g.matcher, "hooks": g.hooks, "source": g.source} for g in groups]
                  for event, groups in self.settings.hooks.items()}
        runner = HookRunner(config, self.project, self.session.session_id, str(self.session.transcript_path),
                            env=dict(self.settings.env))
        for w in runner.warnings:
            self.notify(w)
        self.hook_bridge = HookBridge(runner, mode, notify=self.notify)
        self.agent.bus.subscribe(self.hook_bridge)
        return runner

    def _warm_start(self, session) -> None:
        kv_path = session.transcript_path.with_suffix(".kv")
        if session.messages and kv_path.exists() and hasattr(self.engine, "load_session"):
            self.engine.load_session(session.session_id, kv_path)

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

    # ---- state

    @property
    def session(self):
        return self.agent.session

    @property
    def mode(self) -> str:
        return self.permissions.mode

    def set_mode(self, mode: str) -> None:
        self.permissions.set_mode(mode)
        if self.hooks is not None:
            self.hook_bridge.permission_mode = mode

    def cycle_mode(self) -> str:
        """default -> acceptEdits -> plan (-> bypassPermissions when started in it) -> default."""
        modes = self.modes
        i = modes.index(self.mode) if self.mode in modes else -1
        self.set_mode(modes[(i + 1) % len(modes)])
        return self.mode

    def status(self) -> StatusInfo:
        u = self.last_usage
        limit = getattr(self.engine, "context_window", None)
        return StatusInfo(
            model=self.engine.name, mode=self.mode,
            context_used=(u.prompt_tokens + u.generated_tokens) if u else 0, context_limit=limit,
            reuse_pct=100 * u.reused_tokens / u.prompt_tokens if u and u.prompt_tokens else None,
            ttft_s=u.ttft_s if u else None, decode_tps=u.decode_tps if u else None,
            spec_accept_pct=100 * u.accepted_tokens / u.drafted_tokens if u and u.drafted_tokens else None,
            cwd=home_relative(self.project), branch=self.branch)

    # ---- running

    def run(self, prompt: str, cancel: threading.Event) -> RunResult:
        """One prompt to its end on this thread; `@file` mentions are attached first."""
        from agent.ui.headless import result_object
        if self._start_source:
            start = ev.SessionStart(source=self._start_source, cwd=str(self.project),
                                    transcript_path=str(self.session.transcript_path), permission_mode=self.mode,
                                    model=self.engine.name, tools=list(self.agent.tools))
            self.agent.pending_context = self.agent.emit(start).additional_context
            self._start_source = None
        result = self.agent.run(self.attach_mentions(prompt), cancel)
        obj = result_object(result, self.session.session_id)
        self.session.record({k: v for k, v in obj.items() if k != "type"} | {"type": "result"})
        self.branch = git_branch(self.project)
        return result

    def attach_mentions(self, prompt: str) -> str:
        """Append each `@path` file that exists, read with the Read tool (so it counts as read for Edit)."""
        from tools.read import ReadTool
        blocks, seen = [], set()
        for m in MENTION.finditer(prompt):
            name = m.group(1).replace("\\ ", " ").rstrip(".,;:)")
            path = self.ctx.resolve(name)
            if path in seen or not path.is_file():
                continue
            seen.add(path)
            result = ReadTool().run({"file_path": str(path)}, self.ctx)
            blocks.append(f'<attached-file path="{name}">\n{result.content}\n</attached-file>')
        return "\n\n".join([prompt, *blocks]) if blocks else prompt

    def _approve(self, tool_name: str, tool_input: dict, reason: str) -> Approval:
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

    def allow_always(self, rules: list[str]) -> None:
        """Store each rule in .agent/settings.local.json and apply it to this session at once."""
        from hooks.settings import add_allow_rule
        for rule in rules:
            self.permissions.add_rule(rule, "allow", "session")
            try:
                add_allow_rule(self.project, rule)
            except ValueError as e:
                self.notify(str(e))

    # ---- context, checkpoints, configuration

    def compact(self, focus: str = "", cancel: threading.Event | None = None):
        """/compact [focus]: the conversation becomes a state block now; CompactionError when it cannot."""
        return self.services.guard.compact(trigger="manual", focus=focus, cancel=cancel or threading.Event())

    def checkpoints(self) -> list:
        """This session's checkpoints, newest first."""
        return self.services.checkpoints.list() if self.services.checkpoints else []

    def rewind(self, checkpoint_id: str, what: str = "both"):
        """/rewind ID [both|code|conversation]; CheckpointError (one line) when it cannot."""
        from agent.services.checkpoint_recorder import rewind
        from agent.services.checkpoints import CheckpointError
        if self.services.checkpoints is None:
            raise CheckpointError("checkpoints are off in this session")
        outcome = rewind(self.agent, self.services.checkpoints.checkpoints, checkpoint_id, what)
        self.last_usage = None
        return outcome

    def _config_changed(self, paths: set[str]) -> None:
        from agent.services.stale_reads import reload_config
        reload_config(self, paths, self.notify)

    # ---- sessions

    def clear(self) -> None:
        """Start a fresh session (the old transcript stays on disk)."""
        self._switch(self._new_session(), "clear")

    def resume(self, session_id: str) -> None:
        from agent.core.transcript import Session, find_session
        session = Session.load(find_session(session_id, self.project))
        for w in session.warnings:
            self.notify(f"warning: {w}")
        self._warm_start(session)
        self._switch(session, "resume")

    def _switch(self, session, source: str) -> None:
        old = self.agent.session
        self.agent.emit(ev.SessionEnd(reason="clear" if source == "clear" else "other"))
        self._save_kv(old)
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
        from agent.paths import project_sessions_dir
        from agent.core.transcript import Session
        d = project_sessions_dir(self.project)
        paths = sorted(d.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns, reverse=True) if d.is_dir() else []
        out = []
        for p in paths[:limit]:
            messages = Session.load(p).messages
            first = next((user_text(m["content"]) for m in messages if m.get("role") == "user"), "")
            out.append((p.stem, p.stat().st_mtime, " ".join(first.split())[:80]))
        return out

    def close(self) -> None:
        self.services.close()
        self.agent.emit(ev.SessionEnd(reason="exit"))
        self._save_kv(self.session)
        self.session.close()

    def _save_kv(self, session) -> None:
        if hasattr(self.engine, "save_session") and session.messages:
            try:
                self.engine.save_session(session.session_id, session.transcript_path.with_suffix(".kv"))
            except Exception as e:  # a failed warm-start file is not worth losing the exit over
                self.notify(f"could not save the KV cache: {type(e).__name__}: {e}")


def preview_diff(name: str, args: dict, target: Path) -> str | None:
    """What an Edit/Write/MultiEdit call on `target` would change, as a unified diff (None for other tools).

    Edits are applied to the file's current text in memory, so the diff shows whole lines with
    their real numbers; an edit that would not apply shows its old/new strings instead.
    """
    if name not in ("Write", "Edit", "MultiEdit"):
        return None
    path = str(args.get("file_path", ""))
    try:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
    except (OSError, UnicodeDecodeError):
        current = ""
    if name == "Write":
        pairs = [(current, str(args.get("content", "")))]
    else:
        edits = [args] if name == "Edit" else [e for e in args.get("edits") or [] if isinstance(e, dict)]
        after = current
        for e in edits:
            old, new = str(e.get("old_string", "")), str(e.get("new_string", ""))
            if not old or old not in after:
                after = None
                break
            after = after.replace(old, new, -1 if e.get("replace_all") else 1)
        pairs = [(current, after)] if after is not None else \
            [(str(e.get("old_string", "")), str(e.get("new_string", ""))) for e in edits]
    out = []
    for old, new in pairs:
        for line in difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                         fromfile=f"a/{path}", tofile=f"b/{path}", n=2):
            out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out)


_CONTEXT_BLOCK = re.compile(r"\A<(memory|skills|agents|env|todos|context)>\n.*?\n</\1>\n\n", re.DOTALL)
_ATTACHED = re.compile(r"\n\n<attached-file path=.*\Z", re.DOTALL)


def user_text(content: str) -> str:
    """What the user typed, from a user message (memory, env, todo and attachment blocks removed)."""
    while True:
        stripped = _CONTEXT_BLOCK.sub("", content, count=1)
        if stripped == content:
            break
        content = stripped
    return _ATTACHED.sub("", content)


def git_branch(cwd: Path) -> str | None:
    """The current branch (or short commit when detached); None outside a git repository."""
    for argv in (["git", "symbolic-ref", "--quiet", "--short", "HEAD"], ["git", "rev-parse", "--short", "HEAD"]):
        try:
            out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def home_relative(path: Path) -> str:
    home = Path.home()
    try:
        return "~/" + Path(path).relative_to(home).as_posix() if Path(path) != home else "~"
    except ValueError:
        return str(path)


def time_ago(ts: float, now: float | None = None) -> str:
    s = max(0, int((now or time.time()) - ts))
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit} ago"
    return f"{s}s ago"


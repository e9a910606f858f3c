"""The `agent` command: headless runs (`-p`), the TUI (no prompt), `agent chat` (the runtime REPL), `agent rewind`.

Only this module reads flags, files and environment variables; everything below it gets
explicit configuration. Expected failures print one line on stderr and exit 1 (AGENT_DEBUG=1
shows the traceback of unexpected ones).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from agent.engines import ENGINE_KINDS, EngineError, make_engine
from agent.core.permissions import PERMISSION_MODES


class CliError(Exception):
    """A usage or configuration problem; the message is one line."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agent", description="A terminal coding agent with an in-process model.")
    p.add_argument("prompt", nargs="?", help="prompt (with -p); without -p, opens the TUI")
    p.add_argument("-p", "--print", dest="print_prompt", nargs="?", const="", default=None, metavar="PROMPT",
                   help="run headless: answer PROMPT (or stdin) and exit")
    p.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text")
    p.add_argument("--max-turns", type=int, default=50, help="engine calls per prompt (default 50)")
    p.add_argument("--max-time", type=float, default=None, metavar="SECONDS", help="wall-clock limit per prompt")
    p.add_argument("--allowedTools", "--allowed-tools", dest="allowed", action="extend", nargs="+", default=[],
                   metavar="RULE", help='permission rules to allow, e.g. "Bash(git diff:*)" Read')
    p.add_argument("--disallowedTools", "--disallowed-tools", dest="disallowed", action="extend", nargs="+",
                   default=[], metavar="RULE", help="permission rules to deny; a bare tool name removes the tool")
    p.add_argument("--permission-mode", choices=PERMISSION_MODES, default=None)
    p.add_argument("--model", default=None, help="local: registry name or .gguf path; openai: the server's model name")
    p.add_argument("--engine", choices=ENGINE_KINDS, default="local")
    p.add_argument("--script", default=None, help="--engine scripted: JSON list of assistant turns")
    p.add_argument("--base-url", default=None, help="--engine openai: e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--system-prompt", default=None, help="replace the system prompt")
    p.add_argument("--append-system-prompt", default=None, help="append to the system prompt")
    p.add_argument("-c", "--continue", dest="continue_", action="store_true", help="continue the latest session here")
    p.add_argument("-r", "--resume", default=None, metavar="ID", help="resume the session with this id")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--plain", action="store_true", help="line-mode REPL instead of the full-screen TUI")
    p.add_argument("--no-speculation", action="store_true",
                   help="turn off speculative decoding (settings \"speculation\": false)")
    p.add_argument("--no-constrained-tools", action="store_true",
                   help="let the local model write tool calls unconstrained (settings \"constrainedTools\": false)")
    p.add_argument("--auto-compact-threshold", type=_threshold, default=None, metavar="FRACTION",
                   help="compact past this share of the context window (0.8 or 80; settings autoCompactThreshold)")
    p.add_argument("--cwd", default=None, help="project directory (default: the current directory)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["chat"]:
            return _chat(argv[1:])
        if argv[:1] == ["rewind"]:
            from agent.rewind_cli import run_rewind
            return run_rewind(argv[1:], Path.cwd())
        if argv[:1] == ["eval"]:
            from agent.eval_cmd import run_eval
            return run_eval(argv[1:])
        args = build_parser().parse_args(argv)
        if args.print_prompt is None:
            return _tui(args)
        return _headless(args)
    except (CliError, EngineError) as e:
        print(f"agent: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        if os.environ.get("AGENT_DEBUG"):
            raise
        print(f"agent: unexpected error: {type(e).__name__}: {e} (set AGENT_DEBUG=1 for details)", file=sys.stderr)
        return 1


def _chat(argv: list[str]) -> int:
    try:
        from runtime.__main__ import main as chat_main
    except ImportError as e:
        raise CliError(f"the runtime chat REPL is not available ({e})") from None
    return chat_main(argv) or 0


def _tui(args: argparse.Namespace) -> int:
    try:
        from agent.ui.tui.app import run_tui
    except ImportError:
        print("agent: the TUI is not available in this build; use agent -p PROMPT", file=sys.stderr)
        return 2
    return run_tui(args) or 0


def _headless(args: argparse.Namespace) -> int:
    # Imported here so `agent --help` and `agent chat` stay fast.
    from agent.core.context import ContextBuilder, model_parameters, system_prompt, tools_for_model
    from agent.core.events import SessionStart
    from agent.ui.headless import headless_approver, run_headless
    from agent.core.loop import Agent, LoopConfig
    from agent.paths import agent_home, claude_home, repo_root
    from agent.core.transcript import Session, SessionError, find_session, latest_session, prune_kv_files
    from runtime.api import Sampling
    from tools.base import ToolContext

    prompt = _read_prompt(args)
    project = Path(args.cwd or os.getcwd()).expanduser().resolve()
    if not project.is_dir():
        raise CliError(f"--cwd {project} is not a directory")
    if args.max_turns < 1:
        raise CliError("--max-turns must be at least 1")
    settings = _load_settings(project)
    if args.verbose:
        for w in settings.warnings:
            print(f"agent: {w}", file=sys.stderr)
    mode = args.permission_mode or settings.permissions.default_mode or "default"
    if mode not in PERMISSION_MODES:
        raise CliError(f"unknown permission mode {mode!r} in settings; use one of {', '.join(PERMISSION_MODES)}")
    allowed, disallowed = split_rules(args.allowed), split_rules(args.disallowed)
    tools = _offered_tools(disallowed + [r.rule for r in settings.permissions.deny])
    permissions = _permissions(settings, mode, project, allowed, disallowed)
    local_options = {"progress": _progress_printer()} if args.engine == "local" and args.verbose else {}
    speculation, constrained = decoding_switches(args, settings.sources)
    if args.engine == "local" and not constrained:
        local_options["constrained_tools"] = False  # the engine then ignores Request.constrained_tools
    engine = make_engine(args.engine, model=args.model or settings.model, script=args.script,
                         base_url=args.base_url, **local_options)
    tools = tools_for_model(tools, model_parameters(engine), mode)  # the core set for models under 2B
    try:
        if args.resume:
            session = Session.load(find_session(args.resume, project))
        elif args.continue_:
            session = Session.load(latest_session(project))
        else:
            session = Session.create(project, {"model": engine.name, "engine": args.engine})
    except SessionError as e:
        raise CliError(str(e)) from None
    for w in session.warnings:
        print(f"agent: warning: {w}", file=sys.stderr)
    ctx = ToolContext(cwd=project, env=dict(settings.env), todos=session.last_todos())
    context = ContextBuilder(project, repo_root(project), agent_home(), claude_home())
    config = LoopConfig(max_turns=args.max_turns, max_wall_s=args.max_time, sampling=Sampling(),
                        speculation=speculation)
    agent = Agent(engine, tools, session, ctx, system_prompt=system_prompt(args.system_prompt,
                                                                           args.append_system_prompt),
                  context=context, permissions=permissions, approver=headless_approver, config=config)
    agent.bus.subscribe(session.recorder)
    _attach_hooks(agent, settings, project, mode)
    from agent.harness.harness import setup_headless  # Task, Skill, ExitPlanMode; `-p "/name args"`
    prompt = setup_headless(agent, project, prompt, os.environ, lambda w: print(f"agent: {w}", file=sys.stderr))
    kv_path = session.transcript_path.with_suffix(".kv")
    if session.messages and kv_path.exists() and hasattr(engine, "load_session"):
        engine.load_session(session.session_id, kv_path)  # warm start; the engine checks it matches
    start = SessionStart(source="resume" if session.messages else "startup", cwd=str(project),
                         transcript_path=str(session.transcript_path), permission_mode=mode, model=engine.name,
                         tools=list(agent.tools))
    from agent.services.attach import attach_services  # compaction, checkpoints, stale-read notices
    services = attach_services(agent, project, settings, notify=_stderr if args.verbose else None, warn=_stderr,
                               compact_threshold=args.auto_compact_threshold)
    cancel = threading.Event()
    previous = signal.signal(signal.SIGINT, _on_sigint(cancel))
    try:
        code = run_headless(agent, prompt, output_format=args.output_format, verbose=args.verbose, start=start,
                            cancel=cancel)
    finally:
        signal.signal(signal.SIGINT, previous)
        services.close()
        session.close()
    # A warm start for --continue/--resume; only the few most recent sessions keep theirs.
    if hasattr(engine, "save_session") and engine.save_session(session.session_id, kv_path):
        prune_kv_files(project)
    return code


def _read_prompt(args: argparse.Namespace) -> str:
    prompt = args.print_prompt or args.prompt or ""
    if not prompt and not sys.stdin.isatty():
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise CliError("no prompt: pass -p PROMPT or pipe it on stdin")
    return prompt


def decoding_switches(args: argparse.Namespace, sources: list[Path]) -> tuple[bool, bool]:
    """(speculation, constrained tool calls): on unless a flag or the settings ("speculation",
    "constrainedTools": false, highest-precedence file first) turn them off."""
    found: dict[str, bool] = {}
    for path in sources:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # hooks.settings has already warned about it
        for key in ("speculation", "constrainedTools"):
            if isinstance(data, dict) and isinstance(data.get(key), bool):
                found.setdefault(key, data[key])
    return (not args.no_speculation and found.get("speculation", True),
            not getattr(args, "no_constrained_tools", False) and found.get("constrainedTools", True))


def split_rules(values: list[str]) -> list[str]:
    """Rules from flags: separated by commas or spaces, except inside parentheses (`Bash(git log:*)`)."""
    rules: list[str] = []
    for value in values:
        depth, cur = 0, ""
        for ch in value:
            depth += (ch == "(") - (ch == ")")
            if depth == 0 and (ch == "," or ch.isspace()):
                if cur:
                    rules.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            rules.append(cur)
    return rules


def _load_settings(project: Path):
    try:
        from hooks.settings import load_settings
    except ImportError as e:
        raise CliError(f"settings support is missing ({e})") from None
    return load_settings(project)


def _offered_tools(deny_rules: list[str]):
    """The built-in and harness tools minus those denied outright (a bare name), so the model is not offered them."""
    import tools as tools_pkg
    from agent.harness.harness import harness_tools, offered_order
    denied = {r for r in deny_rules if "(" not in r}
    return offered_order([t for t in tools_pkg.builtin_tools() + harness_tools() if t.name not in denied])


def _permissions(settings, mode: str, project: Path, allowed: list[str], disallowed: list[str]):
    from agent.core.permissions import Permissions
    return Permissions(settings.permissions, mode, project, additional_dirs=tuple(
        settings.permissions.additional_directories), cli_allowed=tuple(allowed), cli_disallowed=tuple(disallowed))


def _attach_hooks(agent, settings, project: Path, mode: str) -> None:
    if not settings.hooks:
        return
    from agent.services.hook_bridge import HookBridge
    from hooks.runner import HookRunner
    config = {event: [{"matcher": g.matcher, "hooks": g.hooks, "source": g.source} for g in groups]
              for event, groups in settings.hooks.items()}
    runner = HookRunner(config, project, agent.session.session_id, str(agent.session.transcript_path),
                        env=dict(settings.env))
    for w in runner.warnings:
        print(f"agent: {w}", file=sys.stderr)
    agent.bus.subscribe(HookBridge(runner, mode))


def _threshold(text: str) -> float:
    from agent.services.context_budget import parse_threshold
    value = parse_threshold(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share of the window (0.8, 80 or 80%)")
    return value


def _stderr(text: str) -> None:
    print(f"agent: {text}", file=sys.stderr, flush=True)


def _progress_printer():
    """Model load/convert progress on stderr, in steps of 10%."""
    shown: dict[str, int] = {}

    def show(p) -> None:
        step = 10 * p.done // max(1, p.total)
        if shown.get(p.what) != step:
            shown[p.what] = step
            print(f"agent: {p.what}: {10 * step}%", file=sys.stderr, flush=True)
    return show


def _on_sigint(cancel: threading.Event):
    """First Ctrl-C cancels the run cleanly (a result is still printed); a second one aborts."""
    def handler(signum, frame):
        if cancel.is_set():
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            raise KeyboardInterrupt
        cancel.set()
    return handler

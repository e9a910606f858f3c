"""The `agent` command: headless runs (`-p`), the TUI (no prompt), `agent chat` (the runtime REPL), `agent rewind`,
`agent mcp` (MCP server configuration).

Only this module reads flags, files and environment variables; everything below it gets
explicit configuration. Expected failures print one line on stderr and exit 1 (AGENT_DEBUG=1
shows the traceback of unexpected ones).
"""
from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from pathlib import Path

from agent.core.text_safety import scrub
from agent.engines import ENGINE_KINDS, EngineError
from agent.core.permissions import PERMISSION_MODES
from agent.paths import use_locations
from agent.session.options import BuildError, SessionOptions
from agent.settings import Environment
from runtime.process_end import run_and_exit


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class CliError(Exception):
    """A usage or configuration problem; the message is one line."""


class UsageError(CliError):
    """A bad flag or flag value (exit code 2, as argparse's)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        raise UsageError(f"{message} (agent --help lists the flags)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="agent", description="A terminal coding agent with an in-process model.")
    p.add_argument("prompt", nargs="?", help="prompt (with -p); without -p, opens the TUI")
    p.add_argument("-p", "--print", dest="print_prompt", nargs="?", const="", default=None, metavar="PROMPT",
                   help="run headless: answer PROMPT (or stdin) and exit")
    p.add_argument("--output-format", choices=("text", "json", "stream-json"), default="text")
    p.add_argument("--input-format", choices=("text", "stream-json"), default="text",
                   help="stream-json: user messages as JSON lines on stdin, many turns in one session "
                        "(needs -p and --output-format stream-json)")
    p.add_argument("--max-turns", type=_turns, default=50, help="engine calls per prompt (default 50)")
    p.add_argument("--max-time", type=_seconds, default=None, metavar="SECONDS", help="wall-clock limit per prompt")
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
    p.add_argument("--tries", type=_tries, default=None, metavar="N",
                   help="small models: candidates sampled together when an edit fails its check (settings \"tries\")")
    p.add_argument("--sandbox", choices=("on", "off", "auto"), default=None,
                   help="run Bash in bubblewrap: on (rules still ask), auto (sandboxed commands run without asking), "
                        "off (settings \"sandbox\")")
    p.add_argument("--cwd", default=None, help="project directory (default: the current directory)")
    return p


def run() -> None:
    """The `agent` console script: main(), then an exit that never aborts in the interpreter's finalization."""
    run_and_exit(main)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["chat"]:
            return _chat(argv[1:])
        if argv[:1] == ["rewind"]:
            from agent.rewind_cli import run_rewind  # loaded on use: keeps `agent --help` fast
            return run_rewind(argv[1:], Path.cwd())
        if argv[:1] == ["mcp"]:
            from agent.mcp.cli import run_mcp  # loaded on use: keeps `agent --help` fast
            environment = _environment()
            try:
                return run_mcp(argv[1:], Path.cwd().resolve(), environment.locations, environment.variables,
                               environment.mcp_startup_timeout_s)
            except ValueError as e:
                raise CliError(str(e)) from None
        if argv[:1] == ["eval"]:
            from agent.eval_cmd import run_eval  # loaded on use: keeps `agent --help` fast
            return run_eval(argv[1:])
        args = build_parser().parse_args(argv)
        environment = _environment()
        if args.print_prompt is None and args.input_format == "stream-json":
            raise CliError("--input-format stream-json works with -p (headless)")
        if args.print_prompt is None:
            return _tui(args, environment)
        return _headless(args, environment)
    except (CliError, EngineError, BuildError) as e:
        print(f"agent: {e}", file=sys.stderr)
        return 2 if isinstance(e, UsageError) else 1
    except KeyboardInterrupt:  # a second Ctrl-C (or SIGTERM) while the first one winds down
        print("agent: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if os.environ.get("AGENT_DEBUG"):
            raise
        print(f"agent: unexpected error: {type(e).__name__}: {e} (set AGENT_DEBUG=1 for details)", file=sys.stderr)
        return 1


def _chat(argv: list[str]) -> int:
    try:
        from runtime.__main__ import main as chat_main  # loaded on use: keeps `agent --help` fast
    except ImportError as e:
        raise CliError(f"the runtime chat REPL is not available ({e})") from None
    return chat_main(argv) or 0


def _environment() -> Environment:
    """The environment variables, read once; the locations are installed for agent.paths."""
    environment = Environment.from_env(os.environ)
    use_locations(environment.locations)
    return environment


def _tui(args: argparse.Namespace, environment: Environment) -> int:
    options = session_options(args, headless=False)
    if args.plain:
        from agent.ui.plain import run_plain  # loaded on use: keeps `agent --help` fast
        return run_plain(options, environment)
    try:
        from agent.ui.tui.app import run_tui  # loaded on use: keeps `agent --help` fast
    except ImportError:
        print("agent: the TUI is not available in this build; use agent -p PROMPT", file=sys.stderr)
        return 2
    return run_tui(options, environment) or 0


def session_options(args: argparse.Namespace, *, headless: bool) -> SessionOptions:
    """The typed options for a session from the parsed flags (the project directory checked)."""
    project = Path(args.cwd or os.getcwd()).expanduser().resolve()
    if not project.is_dir():
        raise CliError(f"--cwd {project} is not a directory")
    return SessionOptions(project=project, engine=args.engine, model=args.model, script=args.script,
                          base_url=args.base_url, max_turns=args.max_turns, max_time=args.max_time,
                          allowed=split_rules(args.allowed), disallowed=split_rules(args.disallowed),
                          permission_mode=args.permission_mode, system_prompt=args.system_prompt,
                          append_system_prompt=args.append_system_prompt, continue_=args.continue_,
                          resume=args.resume, speculation=not args.no_speculation,
                          constrained_tools=not args.no_constrained_tools,
                          initial_prompt=None if headless else (args.prompt or None),
                          auto_compact_threshold=args.auto_compact_threshold, headless=headless,
                          verbose=args.verbose, tries=args.tries, sandbox=args.sandbox)


def _headless(args: argparse.Namespace, environment: Environment) -> int:
    # Imported here so `agent --help` and `agent chat` stay fast.
    from agent.harness.harness import expand_prompt, narrow_for_request
    from agent.session.builder import build_session  # loaded on use: keeps `agent --help` fast
    from agent.core.transcript import prune_kv_files  # loaded on use: keeps `agent --help` fast
    from agent.ui.headless import run_headless  # loaded on use: keeps `agent --help` fast

    streaming = args.input_format == "stream-json"
    if streaming and args.output_format != "stream-json":
        raise CliError("--input-format stream-json requires --output-format stream-json")
    prompt = "" if streaming else _read_prompt(args)
    options = session_options(args, headless=True)
    if hasattr(sys.stdout, "reconfigure"):  # a result is printed whatever text reaches it
        sys.stdout.reconfigure(errors="replace")
    core = build_session(options, environment, notify=_stderr if args.verbose else None, warn=_stderr,
                         progress=_progress_printer() if args.engine == "local" and args.verbose else None)
    def prepare(text: str, first: bool) -> str:
        if first:
            narrow_for_request(core.agent, text)  # Task only when asked, for profiles that say so
        return expand_prompt(core.agent, core.harness, text)  # `-p "/name args"`

    cancel = threading.Event()
    # SIGTERM and SIGHUP (a supervisor, a closed terminal) stop the run like Ctrl-C: the result is printed and
    # every process group the session started is killed in the `finally`.
    handler = _on_interrupt(cancel)
    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        if streaming:
            from agent.ui.stream_input import run_stream_input  # loaded on use: keeps `agent --help` fast
            code = run_stream_input(core, sys.stdin, prepare=prepare, cancel=cancel, out=sys.stdout, err=sys.stderr)
        else:
            code = run_headless(core, prepare(prompt, True), output_format=args.output_format,
                                verbose=args.verbose, cancel=cancel)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        core.services.close()
        core.close_mcp()
        core.stop_processes()
        core.session.close()
    # A warm start for --continue/--resume; only the few most recent sessions keep theirs.
    if core.save_kv(core.session):
        prune_kv_files(options.project)
    return code


def _read_prompt(args: argparse.Namespace) -> str:
    prompt = args.print_prompt or args.prompt or ""
    if not prompt and not sys.stdin.isatty():
        # Bytes that are not UTF-8 become U+FFFD rather than a UnicodeDecodeError with no result.
        prompt = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    prompt = scrub(prompt)  # argv undecodable in the locale arrives with lone surrogates
    if not prompt.strip():
        raise CliError("no prompt: pass -p PROMPT or pipe it on stdin")
    return prompt


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


def _threshold(text: str) -> float:
    from agent.services.context_budget import parse_threshold  # loaded on use: keeps `agent --help` fast
    value = parse_threshold(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share of the window (0.8, 80 or 80%)")
    return value


def _turns(text: str) -> int:
    if not text.strip().isdigit() or not 1 <= int(text) <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of turns from 1 to 100000")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= threading.TIMEOUT_MAX:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _tries(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 16:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of tries from 1 to 16")
    return int(text)


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


def _on_interrupt(cancel: threading.Event):
    """The first Ctrl-C, SIGTERM or SIGHUP cancels the run cleanly (a result is still printed); a second one
    aborts (the session's processes are still stopped on the way out)."""
    def handler(signum, frame):
        if cancel.is_set():
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            raise KeyboardInterrupt
        cancel.set()
    return handler

"""`agent eval`: run the task suite in evals/ headless and report pass rate, pass^k, calls and tokens.

    agent eval [--suite tasks|heldout] [--tasks GLOB[,GLOB]] [--model M] [--engine E] [--repeat K] [--out DIR]

Exit code 0 when every try passed and no task was skipped, 1 otherwise (or on a usage error).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.engines import ENGINE_KINDS


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not argparse's usage block
        self.exit(2, f"agent eval: {message} (agent eval --help lists the flags)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="agent eval", description="Run the agent task suite (evals/) headless.")
    p.add_argument("--tasks", action="append", default=[], metavar="GLOB",
                   help="task names to run, as globs (repeatable, or comma-separated); default: all")
    p.add_argument("--model", default=None, help="passed to agent --model")
    p.add_argument("--engine", choices=ENGINE_KINDS, default="local")
    p.add_argument("--base-url", default=None, help="--engine openai: the server's /v1 URL")
    p.add_argument("--repeat", type=int, default=1, metavar="K", help="tries per task; reports pass^K")
    p.add_argument("--out", default=None, metavar="DIR", help="report and artifacts (default evals/runs/<stamp>)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="seconds per prompt, for every task")
    p.add_argument("--suite", choices=("tasks", "heldout"), default="tasks",
                   help="evals/tasks (default) or evals/heldout, the held-out set kept for reporting")
    p.add_argument("--tasks-dir", default=None, metavar="DIR", help="another task folder (overrides --suite)")
    p.add_argument("--keep", action="store_true", help="keep each try's project copy in the out dir")
    p.add_argument("--list", action="store_true", help="list the selected tasks and exit")
    p.add_argument("--agent-arg", action="append", default=[], metavar="ARG",
                   help="an extra argument for every `agent -p` (repeatable), e.g. --agent-arg=--max-turns=5")
    p.add_argument("--no-speculation", action="store_true", help="passed to every `agent -p`")
    p.add_argument("--no-constrained-tools", action="store_true", help="passed to every `agent -p`")
    return p


def run_eval(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.repeat < 1 or (args.timeout is not None and not 0 < args.timeout < float("inf")):  # nan fails too
        print("agent eval: --repeat must be at least 1 and --timeout positive", file=sys.stderr)
        return 1
    try:
        format_table, EvalOptions, run_suite, SUITES, discover = _import_evals()
    except ImportError as e:
        print(f"agent eval: the eval suite is not available ({e}); run it from a source checkout", file=sys.stderr)
        return 1
    patterns = [p for value in args.tasks for p in value.split(",") if p]
    tasks_dir = Path(args.tasks_dir).resolve() if args.tasks_dir else SUITES[args.suite]
    if args.list:
        tasks, errors = discover(tasks_dir, patterns or None)
        for t in tasks:
            print(f"{t.name:28} {','.join(t.tags)}")
        for e in errors:
            print(f"broken: {e}", file=sys.stderr)
        return 1 if errors else 0
    switches = ["--no-speculation"] * args.no_speculation + ["--no-constrained-tools"] * args.no_constrained_tools
    opts = EvalOptions(engine=args.engine, model=args.model, base_url=args.base_url, repeat=args.repeat,
                       timeout=args.timeout, tasks_dir=tasks_dir, patterns=patterns,
                       out_dir=Path(args.out).resolve() if args.out else None, keep=args.keep,
                       extra_args=list(args.agent_arg) + switches)
    report = run_suite(opts, echo=lambda line: print(line, file=sys.stderr, flush=True))
    if not report["tasks"]:
        print("agent eval: no task to run" + (f" matches {', '.join(patterns)}" if patterns else ""), file=sys.stderr)
        return 1
    print(format_table(report))
    print(f"report: {report['meta']['out_dir']}/report.json")
    s = report["summary"]
    return 0 if s["passed_tries"] == s["tries"] and not report["skipped"] else 1


def _import_evals():
    """The suite lives beside the packages in a source checkout, not in the installed distribution."""
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "evals" / "runner.py").is_file() and str(checkout) not in sys.path:
        sys.path.append(str(checkout))  # appended: an installed `evals` (if any) keeps precedence
    from evals.report import format_table  # evals/ is a checkout folder, not installed: loaded on use
    from evals.runner import EvalOptions, run_suite  # evals/ is a checkout folder, not installed: loaded on use
    from evals.task import SUITES, discover  # evals/ is a checkout folder, not installed: loaded on use
    return format_table, EvalOptions, run_suite, SUITES, discover

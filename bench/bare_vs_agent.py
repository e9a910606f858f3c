"""The bare model vs the agent on the same eval tasks: one table of pass rates, per category and in all.

    python bench/bare_vs_agent.py                               # the held-out set, default model, both ways
    python bench/bare_vs_agent.py --tasks 'stub-*' --only bare  # the bare run only, on the stub tasks
    python bench/bare_vs_agent.py --suite tasks --model qwen2.5-coder-1.5b --only agent

bare:  Aider's whole-file shape (evals/bare.py): one greedy prompt with the task's instructions and
       its `bare_files`, through runtime.engine.LocalEngine with no tools; the reply's fenced block
       replaces `bare_target`, then the task's verifier runs. Tasks without `bare_target` (answers,
       shell runs, multi-file renames) are left out of this column and listed.
agent: `agent -p` headless through the evals runner (evals/runner.py), one try per task.
Results: a JSON file and per-try artifacts under --out (default evals/runs/<stamp>-bare-vs-agent-<model>).
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import sys
import time
from pathlib import Path

# Run as a script, this file's folder is first on sys.path; the repository root is needed for `evals`.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from evals.bare import comparison_table, run_bare  # noqa: E402
from evals.runner import REPO_ROOT, EvalOptions, run_suite, untouched_problem  # noqa: E402
from evals.task import SUITES, discover  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", choices=sorted(SUITES), default="heldout")
    p.add_argument("--tasks", action="append", default=[], metavar="GLOB", help="task name globs (comma-separated)")
    p.add_argument("--model", default=None, help="registry name or GGUF path (default: the bundled default, the 1.5B)")
    p.add_argument("--only", choices=("bare", "agent"), default=None, help="run one side only")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="agent: seconds per prompt")
    p.add_argument("--max-tokens", type=int, default=2048, help="bare: reply length limit")
    p.add_argument("--out", default=None, metavar="DIR")
    args = p.parse_args(argv)
    patterns = [g for value in args.tasks for g in value.split(",") if g]
    tasks, errors = discover(SUITES[args.suite], patterns or None)
    for e in errors:
        print(f"broken task: {e}", file=sys.stderr)
    if not tasks:
        print("bare_vs_agent: no task to run", file=sys.stderr)
        return 1
    model_tag = Path(args.model).stem if args.model else "default"
    out = Path(args.out).resolve() if args.out else \
        REPO_ROOT / "evals" / "runs" / f"{time.strftime('%Y%m%d-%H%M%S')}-bare-vs-agent-{model_tag}"
    bare: dict[str, dict] = {}
    agent: dict[str, list[dict]] = {}
    skipped: list[str] = []
    if args.only != "agent":
        bare, skipped = run_bare_side(tasks, args, out / "bare")
    if args.only != "bare":
        report = run_suite(EvalOptions(model=args.model, timeout=args.timeout, tasks_dir=SUITES[args.suite],
                                       patterns=patterns, out_dir=out / "agent"),
                           echo=lambda line: print(f"agent {line}", file=sys.stderr, flush=True))
        agent = {row["name"]: row["tries"] for row in report["tasks"]}
        skipped += [f"{s['name']} (agent: {s['reason']})" for s in report["skipped"]]
    no_bare = [t.name for t in tasks if not t.bare_target]
    print(f"suite {args.suite}, model {args.model or '(default)'}, {len(tasks)} tasks")
    print(comparison_table(tasks, bare, agent))
    if args.only != "agent" and no_bare:
        print(f"not in the bare run (no bare_target): {', '.join(no_bare)}")
    for line in skipped:
        print(f"skipped {line}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "bare_vs_agent.json").write_text(json.dumps(
        {"suite": args.suite, "model": args.model, "patterns": patterns, "bare": bare, "agent": agent,
         "no_bare_target": no_bare, "skipped": skipped}, indent=2) + "\n", encoding="utf-8")
    print(f"results: {out}/bare_vs_agent.json")
    return 0


def run_bare_side(tasks, args, out: Path) -> tuple[dict[str, dict], list[str]]:
    """Load the model once and give each task with a bare_target one shot; ({name: record}, skipped lines)."""
    from runtime.engine import LocalEngine
    from runtime.options import RuntimeOptions
    records, skipped = {}, []
    engine = None
    for task in [t for t in tasks if t.bare_target]:
        problem = untouched_problem(task)
        if problem:
            skipped.append(f"{task.name} (bare: {problem})")
            continue
        if engine is None:
            # No warm starts: each shot is prefilled cold, whatever KV other runs left in the shared prefix store.
            options = dataclasses.replace(RuntimeOptions.from_env(os.environ), prefix_cache_bytes=0)
            engine = LocalEngine.from_spec(args.model, options)
        rec = run_bare(task, engine, max_tokens=args.max_tokens, keep_dir=out / task.name)
        records[task.name] = rec
        print(f"bare {'PASS' if rec['passed'] else 'FAIL'} {task.name} {rec['wall_s']:.0f}s "
              f"{rec.get('output_tokens', 0)} tokens{'' if rec['passed'] else ': ' + rec['reason'][:160]}",
              file=sys.stderr, flush=True)
    del engine
    gc.collect()  # the agent side runs the model again in its own processes
    return records, skipped


if __name__ == "__main__":
    sys.exit(main())

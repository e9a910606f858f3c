"""The eval report: per-task records and summaries, pass rate and pass^k, written as JSON and shown as a table.

pass rate = passed tries / all tries; pass^k = tasks whose k tries all passed / tasks (k = --repeat).
With k = 1 both are the same number; with k > 1, pass^k shows how often the agent can be trusted
to succeed every time, which is what a user feels.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from evals.task import CATEGORIES

COUNTERS = ("turns", "tool_calls", "malformed_calls", "text_calls", "reused_tokens", "prefilled_tokens",
            "drafted_tokens", "accepted_tokens", "output_tokens", "first_candidates", "first_passed", "wall_s")


def build_report(opts, tasks, records: dict[str, list[dict]], skipped: list[dict], started: float,
                 out_dir: Path, complete: bool = True) -> dict:
    """The whole report as one JSON-ready dict."""
    rows = []
    for task in tasks:
        tries = records.get(task.name, [])
        rows.append({"name": task.name, "tags": task.tags, "category": task.category, "tries": tries,
                     "passed": sum(t["passed"] for t in tries),
                     "all_passed": bool(tries) and all(t["passed"] for t in tries),
                     **{f"mean_{c}": _mean([t.get(c, 0) for t in tries]) for c in COUNTERS}})
    meta = {**_meta(opts, started), "out_dir": str(out_dir), "complete": complete}
    return {"meta": meta, "summary": summarize(rows, opts.repeat), "categories": by_category(rows), "tasks": rows,
            "skipped": skipped}


def by_category(rows: list[dict]) -> dict[str, dict]:
    """{category: {"tasks", "tries", "passed_tries"}} in CATEGORIES order; tasks without a category are left out."""
    groups: dict[str, dict] = {c: {"tasks": 0, "tries": 0, "passed_tries": 0} for c in CATEGORIES}
    for r in rows:
        if r.get("category") in groups:
            g = groups[r["category"]]
            g["tasks"] += 1
            g["tries"] += len(r["tries"])
            g["passed_tries"] += r["passed"]
    return {c: g for c, g in groups.items() if g["tasks"]}


def summarize(rows: list[dict], repeat: int) -> dict:
    tries = [t for r in rows for t in r["tries"]]
    n_tasks = len(rows)
    return {"tasks": n_tasks, "tries": len(tries), "repeat": repeat,
            "passed_tries": sum(t["passed"] for t in tries),
            "pass_rate": _ratio(sum(t["passed"] for t in tries), len(tries)),
            "pass_all_tasks": sum(r["all_passed"] for r in rows),
            "timed_out_tries": sum(_timed_out(t) for t in tries),
            f"pass^{repeat}": _ratio(sum(r["all_passed"] for r in rows), n_tasks),
            **{f"total_{c}": round(sum(t.get(c, 0) for t in tries), 2) for c in COUNTERS}}


def format_table(report: dict) -> str:
    """A fixed-width table: one row per task, then the skipped tasks and a summary line."""
    head = ("task", "pass", "turns", "calls", "bad", "txt", "reused", "prefill", "drafted", "accept", "cands",
            "wall_s")
    rows = [head]
    for r in report["tasks"]:
        n = len(r["tries"])
        rows.append((r["name"], f"{r['passed']}/{n}", _num(r["mean_turns"]), _num(r["mean_tool_calls"]),
                     _num(r["mean_malformed_calls"]), _num(r["mean_text_calls"]), _num(r["mean_reused_tokens"]),
                     _num(r["mean_prefilled_tokens"]), _num(r["mean_drafted_tokens"]),
                     _num(r["mean_accepted_tokens"]), _candidates(r["tries"]), _num(r["mean_wall_s"])))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    for s in report["skipped"]:
        lines.append(f"skipped {s['name']}: {s['reason']}")
    groups = report.get("categories") or {}
    if groups:
        lines.append("by category: " + ", ".join(f"{name} {g['passed_tries']}/{g['tries']}"
                                                 for name, g in groups.items()))
    lines.append(summary_line(report["summary"]))
    return "\n".join(lines)


def summary_line(s: dict) -> str:
    k = s["repeat"]
    line = (f"pass rate {s['passed_tries']}/{s['tries']} tries ({_pct(s['pass_rate'])}); "
            f"pass^{k} {s['pass_all_tasks']}/{s['tasks']} tasks ({_pct(s[f'pass^{k}'])}); "
            f"malformed calls {s['total_malformed_calls']}, calls written as text {s['total_text_calls']}; "
            f"timed out {s['timed_out_tries']}; wall {s['total_wall_s']:.0f}s")
    if s.get("total_first_candidates"):
        line += (f"; first-round candidates passed {s['total_first_passed']:.0f}/"
                 f"{s['total_first_candidates']:.0f}")
    return line


def _candidates(tries: list[dict]) -> str:
    """First-round candidates that passed / sampled, over a task's tries; "-" when none sampled."""
    sampled = sum(t.get("first_candidates", 0) for t in tries)
    return f"{sum(t.get('first_passed', 0) for t in tries)}/{sampled}" if sampled else "-"


def _timed_out(t: dict) -> bool:
    """A try stopped by the wall-clock limit (--max-time) or killed past it: under CPU contention, not the model."""
    return any(p.get("stop_reason") == "timeout" or str(p.get("exit", "")).startswith("killed")
               for p in t.get("prompts") or [])


def write_report(report: dict, path: Path) -> None:
    """Atomic: a reader never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".report-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def _meta(opts, started: float) -> dict:
    return {"engine": opts.engine, "model": opts.model or "(default)", "repeat": opts.repeat,
            "timeout_override": opts.timeout, "patterns": opts.patterns, "extra_args": opts.extra_args,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
            "duration_s": round(time.time() - started, 1), "commit": _git_commit(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs"}


def _git_commit() -> str:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return r.stdout.strip() or "unknown"


def _mean(values: list) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def _ratio(a: int, b: int) -> float:
    return round(a / b, 4) if b else 0.0


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"

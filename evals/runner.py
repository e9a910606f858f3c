"""Run eval tasks: each try in a fresh temporary copy, through the real `python -m agent -p` subprocess.

Before any agent runs, every selected task's verifier is run on its untouched fixture and must
fail; a task whose verifier passes untouched proves nothing and is skipped (and reported).
A try is: prepare the copy -> run the prompt (and the follow-up, resuming the session) with
stream-json output -> read the transcript -> verify(run) -> keep the artifacts in the out dir.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from evals.outcome import RunView, metrics, read_transcript
from evals.task import TASKS_DIR, Task, TaskError, discover, load_verifier, prepare, run_commands

REPO_ROOT = Path(__file__).resolve().parents[1]
LOAD_ALLOWANCE_S = 240  # on top of a task's --max-time: model load (first conversion takes longest)


@dataclass
class EvalOptions:
    engine: str = "local"
    model: str | None = None
    base_url: str | None = None
    repeat: int = 1
    timeout: float | None = None  # overrides each task's timeout
    tasks_dir: Path = TASKS_DIR
    patterns: list[str] = field(default_factory=list)
    out_dir: Path | None = None
    keep: bool = False  # keep each try's project copy under out_dir
    extra_args: list[str] = field(default_factory=list)  # passed to every `agent -p`

    def __post_init__(self) -> None:
        assert self.repeat >= 1 and (self.timeout is None or self.timeout > 0)


def run_suite(opts: EvalOptions, echo: Callable[[str], None] = print) -> dict:
    """Check, run and summarize the selected tasks; writes report.json under opts.out_dir; returns the report."""
    from evals.report import build_report, write_report
    tasks, skipped = select(opts, echo)
    out_dir = opts.out_dir or default_out_dir(opts)
    started = time.time()
    records: dict[str, list[dict]] = {}
    for task in tasks:
        for k in range(opts.repeat):
            rec = run_try(task, opts, out_dir / task.name / f"try-{k + 1}")
            records.setdefault(task.name, []).append(rec)
            echo(f"{'PASS' if rec['passed'] else 'FAIL'} {task.name} [{k + 1}/{opts.repeat}] "
                 f"{rec['wall_s']:.0f}s{'' if rec['passed'] else ': ' + rec['reason'][:160]}")
            # Rewritten after every try: a long run that is stopped still leaves a report of what it did.
            done = [t for t in tasks if t.name in records]
            write_report(build_report(opts, done, records, skipped, started, out_dir, complete=False),
                         out_dir / "report.json")
    report = build_report(opts, tasks, records, skipped, started, out_dir)
    write_report(report, out_dir / "report.json")
    return report


def default_out_dir(opts: EvalOptions) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    model = (opts.model or ("default" if opts.engine == "local" else opts.engine)).replace("/", "_")
    return REPO_ROOT / "evals" / "runs" / f"{stamp}-{Path(model).stem}"


def select(opts: EvalOptions, echo: Callable[[str], None]) -> tuple[list[Task], list[dict]]:
    """(runnable tasks, skipped [{name, reason}]); runs every verifier on its untouched fixture."""
    tasks, errors = discover(opts.tasks_dir, opts.patterns or None)
    skipped = [{"name": e.split(":")[0], "reason": e} for e in errors]
    runnable = []
    for task in tasks:
        reason = untouched_problem(task)
        if reason is None and opts.engine == "scripted" and task.script is None:
            reason = "no `script` for the scripted engine"
        if reason:
            skipped.append({"name": task.name, "reason": reason})
            echo(f"skip {task.name}: {reason}")
        else:
            runnable.append(task)
    return runnable, skipped


def untouched_problem(task: Task) -> str | None:
    """None when the verifier fails on the untouched fixture (as it must); else why the task is unusable."""
    with tempfile.TemporaryDirectory(prefix=f"eval-untouched-{task.name}-") as tmp:
        try:
            proj = prepare(task, Path(tmp) / "proj")
            verdict = verify_run(task, RunView(proj, task.fixture))
        except TaskError as e:
            return str(e)
    if verdict["verifier_error"]:
        return f"the verifier crashed on the untouched fixture: {verdict['reason']}"
    if verdict["passed"]:
        return "the verifier passes on the untouched fixture, so it cannot tell success from doing nothing"
    return None


def verify_run(task: Task, view: RunView) -> dict:
    """{"passed", "reason", "verifier_error"}: an AssertionError is a failure, any other exception a broken verifier."""
    verify = load_verifier(task)
    try:
        verify(view)
    except AssertionError as e:
        return {"passed": False, "reason": str(e) or _assert_line(e), "verifier_error": False}
    except Exception as e:
        return {"passed": False, "reason": f"{type(e).__name__}: {e}", "verifier_error": True}
    return {"passed": True, "reason": "", "verifier_error": False}


def _assert_line(e: AssertionError) -> str:
    frame = traceback.extract_tb(e.__traceback__)[-1]
    return f"assertion failed: {frame.line} (verify.py line {frame.lineno})"


def run_try(task: Task, opts: EvalOptions, try_dir: Path) -> dict:
    """One try of `task`; returns its record (verdict, metrics, per-prompt exits) and writes artifacts."""
    try_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"eval-{task.name}-"))
    record: dict = {"passed": False, "reason": "", "prompts": []}
    t0 = time.monotonic()
    try:
        proj = prepare(task, tmp / "proj")
        env = isolated_env(tmp, opts)
        results, stream, session_id = [], [], None
        for i, prompt in enumerate(task.prompts):
            if i == 1:
                run_commands(task.between, proj, "between")
            cmd = agent_command(task, opts, prompt, i, session_id, tmp)
            exit_info, lines, stderr = _run_agent(cmd, proj, env, _hard_limit(task, opts))
            stream += lines
            (try_dir / f"stderr-{i + 1}.txt").write_text(stderr, encoding="utf-8")
            result = next((ln for ln in reversed(lines) if ln.get("type") == "result"), None)
            record["prompts"].append({**exit_info, "subtype": result and result.get("subtype"),
                                      "stop_reason": result and result.get("stop_reason")})
            if result is None:
                record["reason"] = f"prompt {i + 1}: no result ({exit_info['exit']}); {_tail(stderr)}"
                break
            results.append(result)
            session_id = result.get("session_id")
        transcript = _find_transcript(tmp / "data", session_id)
        view = RunView(proj, task.fixture, results, read_transcript(transcript) if transcript else [], stream)
        _write_lines(try_dir / "stream.jsonl", stream)
        if transcript:
            shutil.copyfile(transcript, try_dir / "transcript.jsonl")
            _keep_subagent_transcripts(transcript, try_dir)
        verdict = verify_run(task, view)
        # The verifier's reason first; a crash or kill of the agent explains a failure too.
        reason = "" if verdict["passed"] else "; ".join(r for r in (verdict["reason"], record["reason"]) if r)
        record.update(verdict, reason=reason)
        record.update(metrics(view), answer=view.answer[:500])
        if opts.keep:
            shutil.copytree(proj, try_dir / "proj", symlinks=True)
    except TaskError as e:
        record.update(passed=False, reason=str(e), verifier_error=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record["wall_s"] = round(time.monotonic() - t0, 2)
    (try_dir / "record.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def isolated_env(tmp: Path, opts: EvalOptions) -> dict:
    """No user settings, memory, skills or sessions leak in; the model cache is shared (it is large)."""
    from runtime.models import default_cache_dir
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "CLAUDE_"))}
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**env, "HOME": str(home), "AGENT_HOME": str(home / ".agent"), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "AGENT_DATA_DIR": str(tmp / "data"), "AGENT_CACHE_DIR": str(default_cache_dir()),
            "PYTHONPATH": pythonpath, "GIT_CONFIG_NOSYSTEM": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def agent_command(task: Task, opts: EvalOptions, prompt: str, index: int, session_id: str | None,
                  tmp: Path) -> list[str]:
    cmd = [sys.executable, "-m", "agent", "-p", prompt, "--output-format", "stream-json",
           "--max-turns", str(task.max_turns), "--max-time", str(opts.timeout or task.timeout),
           "--engine", opts.engine]
    if opts.model:
        cmd += ["--model", opts.model]
    if opts.base_url:
        cmd += ["--base-url", opts.base_url]
    if opts.engine == "scripted":
        script = tmp / f"script-{index + 1}.json"
        script.write_text(json.dumps(task.scripts()[index] or []), encoding="utf-8")
        cmd += ["--script", str(script)]
    if task.permission_mode:
        cmd += ["--permission-mode", task.permission_mode]
    if task.allowed_tools:
        cmd += ["--allowedTools", *task.allowed_tools]
    if task.disallowed_tools:
        cmd += ["--disallowedTools", *task.disallowed_tools]
    if index > 0:
        cmd += ["--continue"] if task.resume == "continue" or not session_id else ["--resume", session_id]
    return cmd + list(opts.extra_args)


def _hard_limit(task: Task, opts: EvalOptions) -> float:
    return (opts.timeout or task.timeout) + LOAD_ALLOWANCE_S


def _run_agent(cmd: list[str], cwd: Path, env: dict, limit_s: float) -> tuple[dict, list[dict], str]:
    """({"exit", "wall_s"}, stream-json lines, stderr); a process past `limit_s` is killed with its group."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit_s)
        exit_text = f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        exit_text = f"killed after {limit_s:g}s"
    lines = []
    for line in out.splitlines():
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            lines.append(obj)
    return {"exit": exit_text, "wall_s": round(time.monotonic() - t0, 2)}, lines, err


def _find_transcript(data_dir: Path, session_id: str | None) -> Path | None:
    if not session_id:
        return None
    return next(iter(sorted((data_dir / "projects").glob(f"*/{session_id}.jsonl"))), None)


def _keep_subagent_transcripts(transcript: Path, try_dir: Path) -> None:
    """Task children write `<transcript without .jsonl>/subagents/*.jsonl` (agent/subagents.py); the temporary
    copy is deleted after the try, so they are kept as `subagents/` beside transcript.jsonl."""
    children = transcript.with_suffix("") / "subagents"
    if children.is_dir():
        shutil.copytree(children, try_dir / "subagents", dirs_exist_ok=True)


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output on stderr"


def _write_lines(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(ln, ensure_ascii=False) + "\n" for ln in lines), encoding="utf-8")

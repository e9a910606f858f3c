"""The bare model in Aider's whole-file shape: one prompt, one fenced code block back, no tools, no loop.

The prompt holds the content of each of a task's `bare_files` and the task's instructions, and
asks for the complete new content of `bare_target` in one fenced code block. That block replaces
the file in a fresh copy of the fixture and the task's own verifier runs, as it does after the
agent. Used by bench/bare_vs_agent.py to compare the bare model with the agent on the same tasks.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from agent.core import model_text as mt
from evals.outcome import RunView
from evals.runner import verify_run
from evals.task import Task, TaskError, prepare
from runtime.api import Done, Request, Sampling, TextDelta

_LANGS = {".py": "python", ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".ini": "ini"}


def bare_messages(task: Task, proj: Path) -> list[dict]:
    """System and user messages for `task`, with its bare files read from `proj`."""
    assert task.bare_target, f"{task.name} has no bare_target"
    shown = []
    for name in task.bare_files:
        text = (proj / name).read_text(encoding="utf-8")
        text += "" if text.endswith("\n") else "\n"
        shown.append(f"{name}\n```{_LANGS.get(Path(name).suffix, '')}\n{text}```")
    user = mt.whole_file_ask("\n\n".join(shown), task.prompt, task.bare_target)
    return [{"role": "system", "content": mt.FRESH_SYSTEM}, {"role": "user", "content": user}]


def extract_code(reply: str, target: str) -> str | None:
    """The block for `target` in `reply`: the first fenced block whose preceding line names the file, else the
    first fenced block; None when the reply has no complete block. Ends with a newline."""
    blocks, label, body, previous = [], "", None, ""
    for line in reply.splitlines():
        if body is None and line.lstrip().startswith("```"):
            label, body = previous, []  # Aider's whole-file replies name the file on the line before the fence
        elif body is not None and line.strip() == "```":
            blocks.append((label, "".join(ln + "\n" for ln in body)))
            body = None
        elif body is not None:
            body.append(line)
        previous = line
    if not blocks:
        return None
    names = [(label.split() or [""])[-1].strip("*`#:") for label, _ in blocks]  # "**src/a.py**:" -> src/a.py
    named = [code for name, (_, code) in zip(names, blocks) if name == target or name.endswith("/" + target)]
    return (named or [blocks[0][1]])[0]


def run_bare(task: Task, engine, max_tokens: int = 2048, keep_dir: Path | None = None) -> dict:
    """One greedy shot at `task` through `engine` (runtime.api.Engine); returns the try's record.

    The record has the verifier's verdict ("passed", "reason", "verifier_error"), the token counts
    and "wall_s"; the reply (and the copy, with `keep_dir`) is written under `keep_dir` when given."""
    record: dict = {"passed": False, "reason": "", "verifier_error": False}
    tmp = Path(tempfile.mkdtemp(prefix=f"bare-{task.name}-"))
    t0 = time.monotonic()
    try:
        proj = prepare(task, tmp / "proj")
        request = Request(session_id=f"bare-{task.name}", messages=bare_messages(task, proj),
                          sampling=Sampling(temperature=0.0, max_tokens=max_tokens))
        parts, done = [], None
        for event in engine.stream(request):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, Done):
                done = event
        reply = "".join(parts)
        if hasattr(engine, "drop_session"):
            engine.drop_session(request.session_id)  # one shot: its KV is not needed again
        record.update(prompt_tokens=done.usage.prompt_tokens if done else 0,
                      output_tokens=done.usage.generated_tokens if done else 0,
                      stop_reason=done.stop_reason if done else "no Done event")
        code = extract_code(reply, task.bare_target)
        if code is None:
            record["reason"] = f"no fenced code block in the reply (stop: {record['stop_reason']})"
        else:
            (proj / task.bare_target).write_text(code, encoding="utf-8")
            verdict = verify_run(task, RunView(proj, task.fixture, [{"subtype": "success", "result": reply}]))
            record.update(verdict)
        if keep_dir is not None:
            keep_dir.mkdir(parents=True, exist_ok=True)
            (keep_dir / "reply.md").write_text(reply, encoding="utf-8")
            shutil.copytree(proj, keep_dir / "proj", dirs_exist_ok=True, symlinks=True)
    except TaskError as e:
        record["reason"] = str(e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record["wall_s"] = round(time.monotonic() - t0, 2)
    return record


def comparison_table(tasks: list[Task], bare: dict[str, dict], agent: dict[str, list[dict]]) -> str:
    """Per category and in all: bare passed/run and agent passed/tries, with their rates.

    `bare` maps a task name to its bare record (tasks absent from it were not in the bare run);
    `agent` maps a task name to its tries. A column with no run at all shows "-"."""
    from evals.task import CATEGORIES
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        groups.setdefault(task.category or "other", []).append(task)
    order = [c for c in CATEGORIES if c in groups] + (["other"] if "other" in groups else [])
    rows = [("category", "tasks", "bare", "agent")]
    for name, members in [(c, groups[c]) for c in order] + [("all", tasks)]:
        b = [bare[t.name]["passed"] for t in members if t.name in bare]
        a = [tr["passed"] for t in members for tr in agent.get(t.name, [])]
        rows.append((name, str(len(members)), _rate(b), _rate(a)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(-1, "-" * len(lines[0]))
    return "\n".join(lines)


def _rate(passed: list[bool]) -> str:
    if not passed:
        return "-"
    return f"{sum(passed)}/{len(passed)} {100 * sum(passed) / len(passed):5.1f}%"

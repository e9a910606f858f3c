"""ruff's fix first: when a request reports a failure and its check failed before any edit, a bug pattern ruff can
repair itself (a mutable default argument, `is` against a literal) in one of the target files is fixed by ruff,
checked in place like a candidate, and written by the harness only when the check passes. A small model reading
such code rarely sees the bug (docs/EVALS.md); a fix that does not pass is undone and the model's edit steps run
as before.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from agent.core import events as ev
from agent.core.loop import Agent
from agent.core.run_types import RunState
from agent.pipeline.lint import ruff_fixed
from agent.pipeline.localize import Localization
from agent.pipeline.route import Plan
from agent.pipeline.tries import check_in_place, runnable_checks


def fix_first(driver: Any, agent: Agent, prompt: str, targets: list[Path], loc: Localization, plan: Plan,
              cancel: threading.Event, st: RunState) -> str | None:
    """The outcome ("Changed x.py ...") of the first target whose ruff fix passed the check, written as a harness
    Write and checked again through the Bash tool; None when there is none (every file as it was)."""
    commands = runnable_checks(driver, agent, prompt, loc, plan) if plan.failing else []
    if not commands:  # nothing shows the fix works: the model's steps decide
        return None
    for target in targets:
        if not target.is_file() or not driver._may_read(agent, target):
            continue
        name = driver.rel(target)
        try:
            original = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if (fix := ruff_fixed(original, target, name)) is None:
            continue
        fixed, found = fix
        tried = check_in_place(driver, agent, prompt, target, original, [(fixed, 0.0)], commands, plan, cancel)
        passed = bool(tried) and tried[0].passed
        agent.emit(ev.PipelineStep(step="lint-fix", detail=f"{name}: ruff's fix of {'; '.join(found)} "
                                                           f"{'passed' if passed else 'did not pass'} the check"))
        if not passed:
            continue
        call = driver.harness_call(agent, "Write", {"file_path": name, "content": fixed}, cancel, st)
        if call.result is None or call.result.is_error:
            driver.restore(agent, target, original)
            return None  # refused (permissions, a hook): the model's steps meet the same rules
        if driver.check(agent, prompt, loc, plan, cancel, st) is None:
            return f"Changed {name} (ruff's fix)" + (f"; {plan.checked}" if plan.checked else "")
        driver.restore(agent, target, original)
    return None

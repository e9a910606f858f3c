"""A refactoring the harness computed (a move, a rename, a literal replacement) applied as the model's edits would
be: one harness Write call per file (permission rules, hooks, checkpoints and transcripts see each), the imports
checked, then the request's check. A refused write or a failed check restores every file and cuts the attempt from
the conversation, so the model's own edit steps run after it as they would have."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from agent.core import events as ev
from agent.core.loop import Agent
from agent.core.run_types import RunState
from agent.pipeline.checks import first_line
from agent.pipeline.imports import broken_imports
from agent.pipeline.move import plan_move
from agent.pipeline.rename import plan_rename
from agent.pipeline.replace import plan_replace
from tools._files import remember


def apply(driver: Any, agent: Agent, prompt: str, texts: dict[Path, str], summary: str, step: str, loc: Any,
          plan: Any, cancel: threading.Event, st: RunState) -> bool:
    """Writes `texts` (new content per file, in order) and checks them; True when the change landed and the answer
    (`summary` and the check that passed) is given. `step` names it for the user ("move", "rename")."""
    agent.emit(ev.PipelineStep(step=step, detail=summary))
    mark = len(agent.session.messages)
    before = {p: p.read_text(encoding="utf-8") if p.exists() else None for p in texts}
    failure = None
    for path, text in texts.items():
        if path.exists():
            remember(agent.ctx, path)  # the harness read it to compute the change
        call = driver.harness_call(agent, "Write", {"file_path": driver.rel(path), "content": text}, cancel, st)
        if call.result is None or call.result.is_error:
            failure = first_line(call.result.content if call.result is not None else "the write did not run")
            break
    broken = [b for p, t in texts.items() for b in broken_imports(t, p, driver.root, before[p])] if failure is None \
        else []
    failure = failure or ("; ".join(broken) if broken else None)
    if failure is None and (checked := driver.check(agent, prompt, loc, plan, cancel, st)) is not None:
        failure = f"{checked[0]} failed ({first_line(checked[1])})"
    if failure is None:
        driver.answer(agent, [summary + (f"; {plan.checked}" if plan.checked else "")], st)
        return True
    for path, text in before.items():
        driver.restore(agent, path, text)
    agent.emit(ev.PipelineStep(step="retry", detail=f"the {step}: {failure}; files restored"))
    first = driver.rel(next(iter(texts)))
    agent.session.replace_messages(agent.session.messages[:mark], {"type": "retry", "file": first, "attempt": 1})
    return False


def planned(driver: Any, agent: Agent, prompt: str, candidates: list[Path], loc: Any, plan: Any,
            cancel: threading.Event, st: RunState) -> bool:
    """The move, rename or literal replacement the request asks for, when the harness can make it itself, made and
    checked; False when there is none or it did not land (the model's edit steps then run)."""
    if (move := plan_move(prompt, driver.root, candidates)) is not None:
        return apply(driver, agent, prompt, move.texts, move.summary(driver.rel), "move", loc, plan, cancel, st)
    if (rename := plan_rename(prompt, driver.root, candidates)) is not None:
        return apply(driver, agent, prompt, rename.texts, rename.summary(driver.rel), "rename", loc, plan, cancel, st)
    if (replace := plan_replace(prompt, plan.targets)) is not None:
        return apply(driver, agent, prompt, replace.texts, replace.summary(driver.rel), "replace", loc, plan, cancel,
                     st)
    return False

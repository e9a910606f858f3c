"""One-expression repairs: when the model's rounds leave a reproduced failure failing, the harness changes one small
expression at a time in the functions the failing test runs (the changes: mutations.py), checks each like a
candidate and writes the first that passes. When none passes but one passes more tests than the file did, the
changes after it are checked too (two slips, one step at a time). Where the request says what a script prints and
what it should print, they are tried before the model's rounds (exact_first).
Mutation-based repair (GenProg, Le Goues et al. 2012; PraPR, Ghanbari et al. 2019): the 1.5B rarely writes an
off-by-one fix in a file it was shown with the failing test (docs/EVALS.md, stop 33's probe: 0 of 32).
"""
from __future__ import annotations

import ast
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core import events as ev
from agent.core.loop import Agent
from agent.core.run_types import RunState
from agent.pipeline.call_trace import trace_failing_test
from agent.pipeline.checks import TEST_RUNNER, expected_output, is_test_file
from agent.pipeline.localize import Localization
from agent.pipeline.mutations import function_mutants
from agent.pipeline.project_imports import imported_modules
from agent.pipeline.route import Plan
from agent.pipeline.shell_runs import as_bash_runs
from agent.pipeline.tries import check_in_place, passed_in_place, run_deadline, runnable_checks

MAX_MUTANTS = 80  # one-expression changes checked at most
BUDGET_S = 40.0  # and for at most this long; a chunk that started ends
CHUNK = 6  # checked together; the first chunk with a passing change ends the search
MAX_FUNCTIONS = 8
NEAR_FAILURES = 2  # a candidate failing at most this many tests (and passing more) gets its changes checked
NEAR_BUDGET_S = 20.0


@dataclass(frozen=True)
class Mutant:
    path: Path
    content: str  # the whole file with the one change
    line: int
    before: str  # the expression as it was written
    after: str
    first: Mutant | None = None  # the change this one was made after (a second step), if any

    def shown(self, name: str) -> str:
        return (f"{self.first.shown(name)} and " if self.first else "") + \
            f"{name}:{self.line} `{self.before}` -> `{self.after}`"

    def described(self) -> str:
        """As the answer names the change: "line 7: `a` -> `b`", or both lines of two steps."""
        if self.first is None:
            return f"line {self.line}: `{self.before}` -> `{self.after}`"
        lines = f"line {self.line}" if self.first.line == self.line else f"lines {self.first.line} and {self.line}"
        return f"{lines}: `{self.first.before}` -> `{self.first.after}`, `{self.before}` -> `{self.after}`"


def suspects(driver: Any, agent: Agent, plan: Plan, commands: list[str],
             within: Path | None = None) -> list[tuple[Path, list[str]]]:
    """The files and functions to change, as the first pytest check's first failing test calls them, deepest first;
    with no trace (a script, a unittest run), every function of the targets, then of what they import; within: one."""
    env, sandbox = as_bash_runs(agent)
    trace = next((t for c in commands[:2] if (t := trace_failing_test(c, driver.root, env, sandbox))), None)
    order: dict[tuple[str, str], tuple[int, int]] = {}
    for i, call in enumerate(trace.calls if trace else []):
        depth, first = order.get((call.file, call.name), (call.depth, i))
        order[(call.file, call.name)] = (max(depth, call.depth), first)
    by_file: dict[Path, list[str]] = {}
    for file, name in sorted(order, key=lambda k: (-order[k][0], order[k][1])):
        path = (driver.root / file).resolve()
        if within is None or path == within:
            by_file.setdefault(path, []).append(name)
    if not by_file:
        for target in [within] if within else dict.fromkeys(plan.targets + imported_modules(driver.root, plan.targets)):
            if target.suffix == ".py" and target.is_file():
                by_file[target] = _all_functions(target)
    # A test changed until it passes would assert nothing: the tests judge, they are never changed. The changes are
    # written in place to be checked: only files the rules let the harness change without asking.
    return [(p, names[:MAX_FUNCTIONS]) for p, names in by_file.items() if names and p.is_file() and
            not is_test_file(p) and driver._may_read(agent, p) and driver.may_write(agent, p)]


def _all_functions(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef):
            names += [f"{node.name}.{n.name}" for n in node.body if isinstance(n, (ast.FunctionDef,
                                                                                   ast.AsyncFunctionDef))]
    return names[:MAX_FUNCTIONS]


def candidates(places: list[tuple[Path, list[str]]]) -> list[Mutant]:
    out: list[Mutant] = []
    for path, names in places:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        out += [Mutant(path, content, line, before, after)
                for line, before, after, content in function_mutants(source, names)]
    return out[:MAX_MUTANTS]


def _search(driver: Any, agent: Agent, prompt: str, mutants: list[Mutant], commands: list[str], plan: Plan,
            cancel: threading.Event, deadline: float | None,
            budget_s: float) -> tuple[Mutant | None, tuple[Mutant, int] | None, int]:
    """(the first change whose checks pass, the first failing change that passed the most tests, how many were
    checked), a chunk at a time while the budget and the run's deadline last."""
    start, tried, found, best = time.monotonic(), 0, None, None
    while mutants[tried:] and found is None and time.monotonic() - start < budget_s and \
            (deadline is None or time.monotonic() < deadline):
        chunk = mutants[tried:tried + CHUNK]
        tried += len(chunk)
        for path in dict.fromkeys(m.path for m in chunk):
            mine = [m for m in chunk if m.path == path]
            checked = check_in_place(driver, agent, prompt, path, path.read_text(encoding="utf-8"),
                                     [(m.content, 0.0) for m in mine], commands, plan, cancel, deadline)
            found = next((mine[t.index] for t in checked if t.passed), None)
            if found is not None:
                break
            for t in checked:
                if t.score > (best[1] if best else 0):
                    best = (mine[t.index], t.score)
    return found, best, tried


def exact_first(driver: Any, agent: Agent, prompt: str, loc: Localization, plan: Plan, cancel: threading.Event,
                st: RunState) -> str | None:
    """A script's reproduced wrong output with the line it should print: the changes in it and what it imports are
    checked before any model round (seconds, where a round samples for a minute); one that prints that line and
    leaves the others as they were, or rewritten just as that line was (output_drifts's strict), is the fix
    (bugfix-closing-time: the model patched the caller; the bug was `<= closing` in the module it imports)."""
    if not driver.config.mutants or not plan.failing or TEST_RUNNER.search(plan.failing) or \
            not expected_output(prompt):
        return None
    plan.exact = True  # the other lines as they were, or rewritten just as the wanted one
    try:
        return repair(driver, agent, prompt, loc, plan, cancel, st)
    finally:
        plan.exact = False


def repair(driver: Any, agent: Agent, prompt: str, loc: Localization, plan: Plan, cancel: threading.Event,
           st: RunState, within: Path | None = None, budget_s: float = BUDGET_S,
           better_than: int | None = None) -> str | None:
    """The outcome ("Changed x.py ...") of the first one-expression change whose checks pass, written as a harness
    Write and checked again through the Bash tool; None when none passed (every file as it was). When none passed
    but one passed more tests than the files did (better_than, else counted then), the changes after that one
    are checked too, for as long again. within: only that file, as it is on disk now (a candidate that came near)."""
    commands = runnable_checks(driver, agent, prompt, loc, plan)
    if not commands:
        return None
    places = suspects(driver, agent, plan, commands, within)
    mutants = candidates(places)
    if not mutants:
        return None
    deadline = run_deadline(agent, st)
    found, best, tried = _search(driver, agent, prompt, mutants, commands, plan, cancel, deadline, budget_s)
    detail = f"{tried} one-expression changes checked"
    # A step must pass more than the files as they are (counted only now: a change that passed needs no count)
    if found is None and best is not None and best[1] > (better_than if better_than is not None else
                                                         passed_in_place(driver, agent, commands, cancel, deadline)):
        # Two slips: the change that passed more tests stays, and its file's changes are checked after it
        step, score = best
        names = list(dict.fromkeys(dict(places).get(step.path, []) + _all_functions(step.path)))  # the rest after
        after = [Mutant(step.path, content, line, before, text, first=step)
                 for line, before, text, content in function_mutants(step.content, names)][:MAX_MUTANTS]
        found, _, more = _search(driver, agent, prompt, after, commands, plan, cancel, deadline, budget_s)
        detail += f", then {more} after {step.shown(driver.rel(step.path))} " \
                  f"(it passed {score} test{'s' * (score != 1)})"
    agent.emit(ev.PipelineStep(step="mutants", detail=detail + ", " + (
        f"passed: {found.shown(driver.rel(found.path))}" if found else "none passed")))
    if found is None:
        return None
    name = driver.rel(found.path)
    before = found.path.read_text(encoding="utf-8")
    call = driver.harness_call(agent, "Write", {"file_path": name, "content": found.content}, cancel, st)
    if call.result is None or call.result.is_error:
        driver.restore(agent, found.path, before)
        return None  # refused (permissions, a hook)
    if driver.check(agent, prompt, loc, plan, cancel, st) is None:
        return f"Changed {name} ({found.described()})" + (f"; {plan.checked}" if plan.checked else "")
    driver.restore(agent, found.path, before)
    return None

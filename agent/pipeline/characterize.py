"""A test the request asks to add, whose only miss is the value it expects. The request asks for a test of the code,
not a change to it, so the code is taken as right and the value the run shows replaces the literal the new test
wrote (a characterization test, Feathers 2004). The 1.5B wrote `assert len(c.items) == 1` after removing a cart's
only item (add-test-for-method): the setup, the call and what it checks were right, the number was not. Only
tests the change added are corrected; a test the file had before judges, it is never changed; and a request that
reports a bug gets none (its test must fail until the fix). An `assert A and B` is split first, and a new check
left reaching for a value that is not there (`c.items[0]` of the emptied cart) is dropped when the test has others."""
from __future__ import annotations

import ast
import re
import threading
from pathlib import Path
from typing import Any

from agent.core import events as ev
from agent.core.loop import Agent
from agent.core.run_types import RunState
from agent.pipeline.checks import ADDS_TEST, is_test_file, reports_failure
from agent.pipeline.localize import Localization
from agent.pipeline.mismatch import NOT_LITERAL, failed_comparison, literal_value
from agent.pipeline.route import Plan
from agent.pipeline.shell_runs import as_bash_runs, run_command
from agent.pipeline.tries import runnable_checks
from tools._files import atomic_write, remember

MAX_VALUES = 3  # expected values corrected, one run each (pytest -x stops at the first failure)
FAILED_AT = re.compile(r"^(?P<file>[^\s:]+\.py):(?P<line>\d+): (?:AssertionError|assert)", re.MULTILINE)
RAISED_AT = re.compile(r"^(?P<file>[^\s:]+\.py):(?P<line>\d+): (?!AssertionError)\w+(?:Error|Exception)$", re.MULTILINE)
EQUALS = ("assertEqual", "assertEquals")
DROPPED = "(dropped)"


def split_conjunctions(source: str, before: str | None) -> str:
    """`assert A and B` in the tests `before` lacks as `assert A` then `assert B`: the same test (the second is
    reached only when the first holds), whose failures each show one comparison a value can be taken for (the
    1.5B wrote `assert len(c.items) == 1 and c.items[0].qty == 2` after removing the only item)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    rows, old = source.splitlines(keepends=True), _test_names(before)
    asserts = [n for f in _tests(tree) if f.name not in old for n in ast.walk(f) if isinstance(n, ast.Assert) and
               n.msg is None and isinstance(n.test, ast.BoolOp) and isinstance(n.test.op, ast.And) and
               n.lineno == n.end_lineno]
    for node in sorted(asserts, key=lambda n: -n.lineno):
        row = rows[node.lineno - 1]
        indent = row[:len(row) - len(row.lstrip())]
        if row.strip() != ast.get_source_segment(source, node):
            continue  # a comment or a second statement on the line: left as written
        parts = [ast.get_source_segment(source, v) for v in node.test.values]
        rows[node.lineno - 1] = "".join(f"{indent}assert {p}\n" for p in parts)
    return "".join(rows)


def dropped(output: str, source: str, before: str | None, name: str) -> tuple[str, int, str] | None:
    """(`source` without the new test's assert that raised, the line, DROPPED): the value it reaches for is not
    there once an earlier check took the run's value (`c.items[0]` of an empty cart); the test keeps its other
    checks. None: no assert raised, it is the test's only one, or the test was in `before`."""
    at = [m for m in RAISED_AT.finditer(output) if m["file"] == name or m["file"].endswith("/" + name)]
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    line = int(at[0]["line"]) if at else 0
    test = next((f for f in _tests(tree) if f.lineno <= line <= (f.end_lineno or f.lineno)), None)
    if test is None or test.name in _test_names(before):
        return None
    asserts = [n for n in ast.walk(test) if isinstance(n, ast.Assert)]
    hit = next((n for n in asserts if n.lineno == line == n.end_lineno), None)
    if hit is None or len(asserts) < 2:
        return None
    rows = source.splitlines(keepends=True)
    del rows[line - 1]
    return "".join(rows), line, DROPPED


def corrected(output: str, source: str, before: str | None, name: str) -> tuple[str, int, str] | None:
    """(`source` with the failing assertion's expected literal replaced by the value the run gave, the line, that
    value), or None: the failure is no `==` of a literal, the value is no literal, or the test was in `before`."""
    found = failed_comparison(output)
    at = [m for m in FAILED_AT.finditer(output) if m["file"] == name or m["file"].endswith("/" + name)]
    if found is None or not at:
        return None
    _, got, _, written = found
    line = int(at[0]["line"])
    if literal_value(got) is NOT_LITERAL:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    test = next((f for f in _tests(tree) if f.lineno <= line <= (f.end_lineno or f.lineno)), None)
    if test is None or test.name in _test_names(before):
        return None
    literal = next((n for n in _expected_nodes(test, line) if ast.get_source_segment(source, n) == written), None)
    if literal is None or literal.end_lineno != literal.lineno:
        return None
    rows = source.splitlines(keepends=True)
    row = rows[literal.lineno - 1]
    start, end = _column(row, literal.col_offset), _column(row, literal.end_col_offset)
    rows[literal.lineno - 1] = row[:start] + got + row[end:]
    return "".join(rows), literal.lineno, got



def repair(driver: Any, agent: Agent, prompt: str, target: Path, name: str, original: str | None,
           loc: Localization, plan: Plan, failure: str, cancel: threading.Event, st: RunState) -> str | None:
    """The outcome ("Changed tests/test_cart.py ...") when the test file on disk passes its checks once its new
    tests expect what the run gave; None (the file as it was on disk) otherwise."""
    if not is_test_file(target) or not ADDS_TEST.search(prompt) or reports_failure(prompt) or not target.is_file():
        return None  # a test that shows a reported bug must fail until the fix: its values are the request's
    commands = runnable_checks(driver, agent, prompt, loc, plan)
    env, sandbox = as_bash_runs(agent)

    def failing(text: str) -> str | None:
        """The first failing check's output with `text` on disk; None when all pass."""
        atomic_write(target, text.encode("utf-8"))
        runs = (run_command(c, driver.root, env, sandbox, cancel=cancel) for c in commands)
        return next((run[1] for run in runs if run[0] != 0), None)

    on_disk = target.read_text(encoding="utf-8")
    content = split_conjunctions(on_disk, original)
    values: list[str] = []
    try:
        output = failing(content) if content != on_disk else failure
        for _ in range(MAX_VALUES):
            if output is None or cancel.is_set():
                break
            if (fix := corrected(output, content, original, name) or dropped(output, content, original, name)) is None:
                return None
            content, line, value = fix
            values.append(f"line {line} expects {value}" if value != DROPPED else f"line {line}'s check dropped")
            output = failing(content)
        if output is not None or not values:
            return None
    finally:
        atomic_write(target, on_disk.encode("utf-8"))
        remember(agent.ctx, target)  # as it was read: the Write that follows may change it
    agent.emit(ev.PipelineStep(step="expected", detail=f"{name}: {', '.join(values)}, the values the run gave"))
    call = driver.harness_call(agent, "Write", {"file_path": name, "content": content}, cancel, st)
    if call.result is None or call.result.is_error or driver.check(agent, prompt, loc, plan, cancel, st) is not None:
        return None
    return f"Changed {name} ({'; '.join(values)}, the values the code gives)" + \
        (f"; {plan.checked}" if plan.checked else "")


def _tests(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The test functions, top-level and in classes."""
    out = []
    for node in tree.body:
        body = node.body if isinstance(node, ast.ClassDef) else [node]
        out += [f for f in body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test")]
    return out


def _test_names(source: str | None) -> set[str]:
    try:
        return {f.name for f in _tests(ast.parse(source or ""))}
    except (SyntaxError, ValueError):
        return set()


def _expected_nodes(test: ast.AST, line: int) -> list[ast.expr]:
    """Both sides of the `assert A == B` or assertEqual(A, B) that starts at `line` (the literal is one of them)."""
    out: list[ast.expr] = []
    for node in ast.walk(test):
        if getattr(node, "lineno", None) != line:
            continue
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 and \
                isinstance(node.test.ops[0], ast.Eq):
            out += [node.test.left, node.test.comparators[0]]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EQUALS and \
                len(node.args) >= 2:
            out += node.args[:2]
    return out


def _column(row: str, offset: int | None) -> int:
    """ast's UTF-8 byte offset as a character index into the row."""
    return len(row.encode("utf-8")[:offset or 0].decode("utf-8", "replace"))

"""One-expression repairs: when the model's rounds leave a reproduced failure failing, the harness changes one small
expression at a time in the functions the failing test runs (a whole number by one, a comparison's bound, a slice
dropped, + for -, / for // or *, min for max, and for or, a call's two arguments exchanged, reverse=True, a statement
that repeats an action deleted, brackets that undo a precedence slip, a // or % bucket counted from 1, a cut that
leaves room for what is appended, a heap entry's priority negated, a number the function uses elsewhere, a copy
appended in place of a list changed later, a split at the first separator only), checks each like a candidate and
writes the first that passes. Where the request says what a script prints and what it should print, they are tried
before the model's rounds (exact_first).
Mutation-based repair (GenProg, Le Goues et al. 2012; PraPR, Ghanbari et al. 2019): the 1.5B rarely writes an
off-by-one fix in a file it was shown with the failing test (docs/EVALS.md, stop 33's probe: 0 of 32).
"""
from __future__ import annotations

import ast
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core import events as ev
from agent.core.loop import Agent
from agent.core.run_types import RunState
from agent.pipeline.call_trace import trace_failing_test
from agent.pipeline.checks import TEST_RUNNER, expected_output, is_test_file
from agent.pipeline.localize import Localization
from agent.pipeline.project_imports import imported_modules
from agent.pipeline.route import Plan
from agent.pipeline.source_text import SourceText
from agent.pipeline.tries import check_in_place, runnable_checks

MAX_MUTANTS = 80  # one-expression changes checked at most
BUDGET_S = 40.0  # and for at most this long; a chunk that started ends
CHUNK = 6  # checked together; the first chunk with a passing change ends the search
MAX_FUNCTIONS = 8
MAX_SWAPS = 12  # a number the function uses elsewhere, tried per function
NEAR_FAILURES = 2  # a candidate failing at most this many tests (and passing more) gets its changes checked
NEAR_BUDGET_S = 20.0
COMPARE_SWAPS: dict[type, tuple[type, ...]] = {
    ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt), ast.GtE: (ast.Gt, ast.LtE),
    ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,), ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,)}
BINARY_SWAPS: dict[type, tuple[type, ...]] = {ast.Add: (ast.Sub,), ast.Sub: (ast.Add,),
                                              ast.Div: (ast.FloorDiv, ast.Mult), ast.FloorDiv: (ast.Div,),
                                              ast.Mult: (ast.Div,)}
CALL_SWAPS = {"min": "max", "max": "min"}
HEAP_PUSHES = ("heappush", "heappushpop", "heapreplace")
NORMALIZERS = ("lower", "casefold", "strip", "upper")  # a string method one side of a comparison may lack
OPERATORS: dict[type, str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
    ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Div: "/",
    ast.FloorDiv: "//", ast.Mult: "*"}
PRECEDENCE: dict[type, int] = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.FloorDiv: 2, ast.Mod: 2,
                               ast.MatMult: 2, ast.Pow: 3}


@dataclass(frozen=True)
class Mutant:
    path: Path
    content: str  # the whole file with the one change
    line: int
    before: str  # the expression as it was written
    after: str

    def shown(self, name: str) -> str:
        return f"{name}:{self.line} `{self.before}` -> `{self.after}`"


def function_mutants(source: str, qualnames: list[str]) -> list[tuple[int, str, str, str]]:
    """(line, before, after, the file with the change) for each one-expression change in the bodies of the named
    functions (Class.method or name), in the order the names are given, number swaps after every other change.
    Only the changed characters differ: the rest of the file keeps its spelling."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    src = SourceText(source)
    out, seen, later = [], {source}, []

    def add(target: ast.AST, text: str | None) -> None:
        if text is not None and (span := src.span(target)) is not None and \
                (content := source[:span[0]] + text + source[span[1]:]) not in seen:
            seen.add(content)
            out.append((target.lineno, source[span[0]:span[1]], text, content))
    for qualname in qualnames:
        func = _definition(tree, qualname)
        if func is None:
            continue
        strings = [n for n in ast.walk(func) if isinstance(n, ast.JoinedStr)]  # 3.11 places their parts loosely
        skip = {id(part) for s in strings for part in ast.walk(s)}
        skip |= {id(n.operand) for n in ast.walk(func) if isinstance(n, ast.UnaryOp) and  # -1 changes as one
                 isinstance(n.op, ast.USub) and _whole_number(n.operand) is not None}
        nodes = [n for stmt in func.body[_docstring(func):] for n in ast.walk(stmt) if id(n) not in skip]
        numbers = sorted({n.value for n in nodes if isinstance(n, ast.Constant) and type(n.value) is int and n.value > 1})
        changes = [c for node in nodes for c in [*_variants(src, node), *_regrouped(src, node), *_made_room(src, node)]]
        changes += _mirrored(func, nodes, {n.name for n in tree.body if isinstance(n, ast.FunctionDef)})
        # numbers swapped grow with their count squared: after every other change, a few a function
        later += [c for node in nodes for c in _other_constant(node, numbers)][:MAX_SWAPS]
        for target, text in changes:
            add(target, text)
        for stmt in _deletable(func):
            a, b = src.starts[stmt.lineno - 1], src.starts[stmt.end_lineno]
            if source[a:b].strip() == src.text(stmt).strip() and (content := source[:a] + source[b:]) not in seen:
                seen.add(content)
                out.append((stmt.lineno, src.text(stmt), "(the line deleted)", content))
    for target, text in later:
        add(target, text)
    return out


def _deletable(func: ast.AST) -> Iterator[ast.stmt]:
    """Statements that only act (a call whose value is dropped, `x += 1`) in a block that keeps another statement:
    one done once too often is a common bug (GenProg's deletion)."""
    for node in ast.walk(func):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list) or len(block) < 2 or node is func and field != "body":
                continue
            for stmt in block:
                if isinstance(stmt, ast.AugAssign) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
                    yield stmt


def _definition(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    scope: list[ast.stmt] = tree.body
    node = None
    for part in [p for p in qualname.split(".") if p != "<locals>"]:
        node = next((n for n in scope if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == part), None)
        if node is None:
            return None
        scope = node.body
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _docstring(func: ast.AST) -> int:
    first = func.body[0] if func.body else None
    return int(isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and
               isinstance(first.value.value, str))


def _whole_number(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
            (n := _whole_number(node.operand)) is not None:
        return -n
    return None


def _variants(src: SourceText, node: ast.AST) -> Iterator[tuple[ast.AST, str | None]]:
    """(the node to replace, its new text) for each change made at this node."""
    if (n := _whole_number(node)) is not None:
        yield from ((node, repr(v)) for v in (n - 1, n + 1))
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield node, repr(not node.value)
    elif isinstance(node, ast.Compare):
        parts, old = [node.left, *node.comparators], [OPERATORS[type(op)] for op in node.ops]
        for i, op in enumerate(node.ops):
            for swap in COMPARE_SWAPS.get(type(op), ()):
                yield node, src.operators(node, parts, old, old[:i] + [OPERATORS[swap]] + old[i + 1:])
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINARY_SWAPS:
        parts = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.target, node.value]
        suffix = "" if isinstance(node, ast.BinOp) else "="
        for swap in BINARY_SWAPS[type(node.op)]:
            yield node, src.operators(node, parts, [OPERATORS[type(node.op)] + suffix], [OPERATORS[swap] + suffix])
    elif isinstance(node, ast.BoolOp):
        was, now = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        gaps = len(node.values) - 1
        yield node, src.operators(node, node.values, [was] * gaps, [now] * gaps)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, src.grouped(node.operand)
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        yield node, src.grouped(node.value)  # the slice dropped: rows[1:] -> rows
        lower, upper, step = node.slice.lower, node.slice.upper, node.slice.step
        if lower is not None and upper is not None and step is None:
            yield node, f"{src.grouped(node.value)}[:{src.text(upper)}]"
            yield node, f"{src.grouped(node.value)}[{src.text(lower)}:]"
        yield from _nudged(src, [b for b in (lower, upper) if b is not None])
    elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Tuple):
        yield from _nudged(src, [node.slice] if isinstance(node.slice, (ast.Name, ast.BinOp, ast.Call)) else [])
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else \
            node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name in CALL_SWAPS and isinstance(node.func, ast.Name):
            yield node.func, CALL_SWAPS[name]
        if name == "range":
            yield from _nudged(src, node.args)
        if name in ("split", "rsplit") and len(node.args) <= 1 and not node.keywords and \
                (text := src.text(node)).endswith(")"):  # `k, v = s.split(":")` on "host:8080" unpacks three
            yield node, text[:-1].rstrip() + (", 1)" if node.args else "None, 1)")
        if name == "append" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            yield node.args[0], f"{node.args[0].id}.copy()"  # a list kept, then cleared or refilled: a copy kept
        if name in ("sorted", "sort") and not any(k.arg == "reverse" for k in node.keywords) and \
                (text := src.text(node)).endswith(")"):
            yield node, text[:-1].rstrip().rstrip(",") + (", " if node.args or node.keywords else "") + \
                "reverse=True)"
        if name in HEAP_PUSHES and len(node.args) == 2:  # a min-heap used as a max-heap: its priority negated
            entry = node.args[1]
            first = entry.elts[0] if isinstance(entry, ast.Tuple) and entry.elts else entry
            if isinstance(first, ast.UnaryOp) and isinstance(first.op, ast.USub):
                yield first, src.text(first.operand)  # already negated: the minus dropped, never `-(-p)`
            elif not isinstance(first, ast.Starred):
                yield first, f"-{src.grouped(first)}"
        if len(node.args) == 2 and not any(isinstance(a, ast.Starred) for a in node.args) and \
                src.text(node.args[0]) != src.text(node.args[1]):
            yield node, src.exchanged(node, *node.args)  # f(a, b) -> f(b, a)


def _regrouped(src: SourceText, node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A precedence slip undone: `f - 32 * 5 / 9` -> `(f - 32) * 5 / 9`, `a * b + c` -> `a * (b + c)`; and a bucket
    counted from 1: `day // 7` -> `(day - 1) // 7`, `(day + 1) // 7` (the same for %)."""
    if not isinstance(node, ast.BinOp) or type(node.op) not in PRECEDENCE or (span := src.span(node)) is None:
        return
    level, text = PRECEDENCE[type(node.op)], src.source

    def tighter(part: ast.AST) -> bool:  # binds tighter than node's operator, and not in brackets of its own
        return isinstance(part, ast.BinOp) and PRECEDENCE.get(type(part.op), 0) > level and \
            (at := src.span(part)) is not None and not text[:at[0]].rstrip().endswith("(")

    if tighter(node.right):  # a - b * c: (a - b) * c
        inner = node.right
        while tighter(inner.left):
            inner = inner.left
        if (joins := src.span(inner.left)) is not None:
            yield node, f"({text[span[0]:joins[1]]}){text[joins[1]:span[1]]}"
    if tighter(node.left):  # a * b + c: a * (b + c)
        inner = node.left
        while tighter(inner.right):
            inner = inner.right
        if (joins := src.span(inner.right)) is not None:
            yield node, f"{text[span[0]:joins[0]]}({text[joins[0]:span[1]]})"
    if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and _whole_number(node.right) is not None and \
            _whole_number(node.left) is None:
        yield from ((node.left, f"({src.grouped(node.left, sums=True)} {sign} 1)") for sign in "-+")


def _mirrored(func: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST],
              defined: set[str]) -> list[tuple[ast.AST, str]]:
    """What the function does to one value done to a parameter it leaves bare: `haystack = normalize(text)` beside
    `query.split()` -> `normalize(query).split()`; `.lower()` likewise. One side of a comparison normalized and the
    other not is a common slip (bugfix-search-case). Wrappers are the module's own one-argument functions."""
    calls = [n for n in nodes if isinstance(n, ast.Call) and len(n.args) == 1 and not n.keywords]
    wrappers = sorted({n.func.id for n in calls if isinstance(n.func, ast.Name) and n.func.id in defined})
    methods = sorted({n.func.attr for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                      not n.args and n.func.attr in NORMALIZERS})
    wrapped = {id(n.args[0]) for n in calls} | {id(n.func.value) for n in nodes if isinstance(n, ast.Call) and
                                               isinstance(n.func, ast.Attribute) and n.func.attr in NORMALIZERS}
    params = {a.arg for a in func.args.args + func.args.kwonlyargs} - {"self", "cls"}
    bare = [n for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in params and
            id(n) not in wrapped]
    return [(n, f"{w}({n.id})") for n in bare for w in wrappers] + [(n, f"{n.id}.{m}()") for n in bare for m in methods]


def _other_constant(node: ast.AST, numbers: list[int]) -> Iterator[tuple[ast.AST, str]]:
    """A number copied from a neighbouring line: `total % 3600` -> `total % 60` when the function uses 60 too."""
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value > 1:
        yield from ((node, repr(v)) for v in numbers if abs(v - node.value) > 1)


def _made_room(src: SourceText, node: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """A cut that leaves room for what is appended to it: `text[:width] + marker` -> `text[:width - len(marker)]
    + marker`, so the whole fits the width."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Subscript) and \
            isinstance(node.left.slice, ast.Slice) and (upper := node.left.slice.upper) is not None and \
            not isinstance(node.right, ast.JoinedStr):
        yield upper, f"{src.grouped(upper, sums=True)} - len({src.text(node.right)})"


def _nudged(src: SourceText, bounds: list[ast.expr]) -> Iterator[tuple[ast.AST, str]]:
    """A bound that is not a plain number, one more and one less (a number changes by itself)."""
    for bound in bounds:
        by_number = isinstance(bound, ast.BinOp) and _whole_number(bound.right) is not None  # n - 1: its 1 changes
        if _whole_number(bound) is None and not by_number and not isinstance(bound, ast.Starred):
            yield bound, f"{src.grouped(bound, sums=True)} + 1"
            yield bound, f"{src.grouped(bound, sums=True)} - 1"


def suspects(driver: Any, agent: Agent, plan: Plan, commands: list[str],
             within: Path | None = None) -> list[tuple[Path, list[str]]]:
    """The files and functions to change, as the first pytest check's first failing test calls them, deepest first;
    with no trace (a script, a unittest run), every function of the targets, then of what they import; within: one."""
    sandbox = getattr(agent.tools.get("Bash"), "sandbox", None)
    env = {**os.environ, **agent.ctx.env}
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


def candidates(driver: Any, agent: Agent, plan: Plan, commands: list[str],
               within: Path | None = None) -> list[Mutant]:
    out: list[Mutant] = []
    for path, names in suspects(driver, agent, plan, commands, within):
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        out += [Mutant(path, content, line, before, after)
                for line, before, after, content in function_mutants(source, names)]
    return out[:MAX_MUTANTS]


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
           st: RunState, within: Path | None = None, budget_s: float = BUDGET_S) -> str | None:
    """The outcome ("Changed x.py ...") of the first one-expression change whose checks pass, written as a harness
    Write and checked again through the Bash tool; None when none passed (every file as it was). within: only
    that file, as it is on disk now (a candidate that came near)."""
    commands = runnable_checks(driver, agent, prompt, loc, plan)
    if not commands:
        return None
    mutants = candidates(driver, agent, plan, commands, within)
    if not mutants:
        return None
    start, tried = time.monotonic(), 0
    found = None
    while mutants[tried:] and found is None and time.monotonic() - start < budget_s:
        chunk = mutants[tried:tried + CHUNK]
        tried += len(chunk)
        for path in dict.fromkeys(m.path for m in chunk):
            mine = [m for m in chunk if m.path == path]
            checked = check_in_place(driver, agent, prompt, path, path.read_text(encoding="utf-8"),
                                     [(m.content, 0.0) for m in mine], commands, plan, cancel)
            found = next((mine[t.index] for t in checked if t.passed), None)
            if found is not None:
                break
    agent.emit(ev.PipelineStep(step="mutants", detail=f"{tried} one-expression changes checked, " + (
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
        return f"Changed {name} (line {found.line}: `{found.before}` -> `{found.after}`)" + \
            (f"; {plan.checked}" if plan.checked else "")
    driver.restore(agent, found.path, before)
    return None

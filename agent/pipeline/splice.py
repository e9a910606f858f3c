"""Spliced candidates: when no candidate of a round passed its tests, a file often has each function right in some
candidate but never all in one (stubs of several functions). Starting from the candidate that passed the most tests,
each definition the round changed is taken in turn from the other candidates, checked like a candidate, and the
version that passes more tests is kept; no model call is made.
"""
from __future__ import annotations

import ast
import functools
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

Tried = Any  # tries.Tried: tries.py calls this module, which imports nothing of it

MAX_CHECKS = 24  # spliced files checked at most
BUDGET_S = 30.0  # and for at most this long; a definition's batch that started ends


def walk_definitions(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, ast.stmt]]:
    """(qualified name, node) of each function and method, nested classes included, in source order."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from walk_definitions(node.body, f"{prefix}{node.name}.")


def start_line(node: ast.stmt) -> int:
    """A definition's first line, its decorators included."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


@functools.lru_cache(maxsize=256)  # a round asks again and again of the same few files; callers only read
def definitions(source: str) -> dict[str, tuple[int, int]] | None:
    """Qualified name (function, Class.method) -> its lines, 1-based and inclusive, decorators included; None when
    the source does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out: dict[str, tuple[int, int]] = {}
    for name, node in walk_definitions(tree.body):
        out.setdefault(name, (start_line(node), node.end_lineno or node.lineno))
    return out


def definition_text(source: str, qualname: str) -> str | None:
    spans = definitions(source)
    if not spans or qualname not in spans:
        return None
    first, last = spans[qualname]
    return "".join(_rows(source)[first - 1:last])


def _rows(text: str) -> list[str]:
    """Lines as ast counts them (str.splitlines also splits at form feeds and other separators)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def spliced(base: str, donor: str, qualname: str) -> str | None:
    """`base` with the donor's version of one definition, the donor's imports and top-level functions that base
    lacks placed before it; None when either file lacks the definition or does not parse."""
    spans, theirs = definitions(base), definition_text(donor, qualname)
    if not spans or qualname not in spans or theirs is None:
        return None
    if not theirs.endswith("\n"):
        theirs += "\n"
    rows = _rows(base)
    first, last = spans[qualname]
    helpers = [definition_text(donor, name) for name in (definitions(donor) or {})
               if "." not in name and name not in spans and name != qualname]
    extra = "".join(f"{h.rstrip()}\n\n\n" for h in helpers if h)
    indent = len(rows[first - 1]) - len(rows[first - 1].lstrip())
    body = "".join(rows[:first - 1]) + (extra if not indent else "") + theirs + "".join(rows[last:])
    return _with_imports(body, donor)


def _with_imports(base: str, donor: str) -> str:
    """The donor's top-level imports that base lacks, after base's own (or its docstring)."""
    try:
        mine, theirs = ast.parse(base), ast.parse(donor)
    except (SyntaxError, ValueError):
        return base
    have = {ast.unparse(n) for n in mine.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    missing = [ast.unparse(n) for n in theirs.body if isinstance(n, (ast.Import, ast.ImportFrom)) and
               ast.unparse(n) not in have and getattr(n, "module", None) != "__future__"]
    if not missing:
        return base
    rows = _rows(base)
    at = 0  # after the leading comments (a shebang), the docstring and the imports that open the module
    while at < len(rows) and rows[at].startswith("#"):
        at += 1
    for i, node in enumerate(mine.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)) or \
                (i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            at = max(at, node.end_lineno or node.lineno)
        else:
            break
    return "".join(rows[:at]) + "".join(f"{m}\n" for m in missing) + "".join(rows[at:])


def best_splice(tried: list[Tried], original: str | None,
                check: Callable[[list[tuple[str, float]]], list[Tried]]) -> tuple[Tried | None, int]:
    """(the spliced file that passed, else the one that passed more tests than every candidate, else None; how many
    spliced files were checked). check: evaluate()s (content, mean log-probability) pairs in place."""
    ran = sorted((t for t in tried if t.score >= 0 and t.problem != "unchanged" and definitions(t.content)),
                 key=lambda t: (t.score, t.mean_logprob), reverse=True)
    if original is None or len(ran) < 2 or (before := definitions(original)) is None:
        return None, 0
    changed = [n for n in before if any(definition_text(t.content, n) not in (None, definition_text(original, n))
                                        for t in ran)]
    if len(changed) < 2:  # one changed definition: its versions are the candidates themselves
        return None, 0
    base, improved, checks, start = ran[0], False, 0, time.monotonic()
    for name in changed:
        mine = definition_text(base.content, name)
        versions: dict[str, tuple[str, float]] = {}
        for t in ran:
            theirs = definition_text(t.content, name)
            if theirs is not None and theirs != mine and theirs not in versions and \
                    (content := spliced(base.content, t.content, name)) is not None:
                versions[theirs] = (content, t.mean_logprob)
        batch = list(versions.values())[:MAX_CHECKS - checks]
        if checks >= MAX_CHECKS or time.monotonic() - start > BUDGET_S:
            break
        if not batch:  # every candidate wrote this one alike: the next definition
            continue
        checks += len(batch)
        results = check(batch)
        winner = max(results, key=lambda t: (t.passed, t.score, -t.failures), default=None)
        if winner is not None and winner.passed:
            return winner, checks
        if winner is not None and winner.score > base.score:
            base, improved = winner, True
    return (base if improved else None), checks

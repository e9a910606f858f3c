"""Spliced candidates: when no candidate of a round passed its tests, a file often has each function right in some
candidate but never all in one (stubs of several functions). Starting from the candidate that passed the most tests,
each definition the round changed is taken in turn from the other candidates, checked like a candidate, and the
version that passes more tests is kept; no model call is made.
"""
from __future__ import annotations

import ast
import time
from collections.abc import Callable
from typing import Any

from agent.pipeline.definitions import definition_text, definitions, source_rows, start_line

Tried = Any  # tries.Tried; tries.py calls this module, so importing it here would make a cycle

MAX_CHECKS = 24  # spliced files checked at most
BUDGET_S = 30.0  # and for at most this long; a definition's batch that started ends


def spliced(base: str, donor: str, qualname: str) -> str | None:
    """`base` with the donor's version of one definition, the donor's imports and top-level functions that base
    lacks placed before it (a method's before its class); None when either file lacks the definition or does not
    parse."""
    spans, theirs = definitions(base), definition_text(donor, qualname)
    if not spans or qualname not in spans or theirs is None:
        return None
    if not theirs.endswith("\n"):
        theirs += "\n"
    rows = source_rows(base)
    first, last = spans[qualname]
    helpers = [definition_text(donor, name) for name in (definitions(donor) or {}) if "." not in name and
               name not in spans]
    extra = "".join(f"{h.rstrip()}\n\n\n" for h in helpers if h)
    # a method's helpers go before the class that holds it
    at = next((start_line(n) for n in ast.parse(base).body if start_line(n) <= first <= (n.end_lineno or 0)), first)
    body = "".join(rows[:at - 1]) + extra + "".join(rows[at - 1:first - 1]) + theirs + "".join(rows[last:])
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
    rows = source_rows(base)
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
                check: Callable[[list[tuple[str, float]]], list[Tried]],
                deadline: float | None = None) -> tuple[Tried | None, int]:
    """(the spliced file that passed, else the one that passed more tests than every candidate, else None; how many
    spliced files were checked). check: evaluate()s (content, mean log-probability) pairs in place. deadline
    (time.monotonic()): no definition's batch starts after it (the run's answer comes before its limit)."""
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
        if checks >= MAX_CHECKS or time.monotonic() - start > BUDGET_S or \
                (deadline is not None and time.monotonic() >= deadline):
            break
        mine = definition_text(base.content, name)
        versions: dict[str, tuple[str, float]] = {}
        for t in ran:
            theirs = definition_text(t.content, name)
            if theirs is not None and theirs != mine and theirs not in versions and \
                    (content := spliced(base.content, t.content, name)) is not None:
                versions[theirs] = (content, t.mean_logprob)
        batch = list(versions.values())[:MAX_CHECKS - checks]
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

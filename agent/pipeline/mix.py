"""Candidates combined function by function: when no rewrite of a Python file passes its check, each may still
have a different function right (one gets the tie order, another the empty case), so the nearest candidate is
tried with one function at a time taken from another, and then with every swap that passed more tests.

Only top-level functions, classes and one-name assignments move; the donor's helpers and constants that a
swapped-in function uses, and imports the base lacks, come along. The harness checks each mix like any candidate.
"""
from __future__ import annotations

import ast

MAX_MIXES = 8  # single swaps checked in one round (each costs a run of the check)


def _defs(source: str) -> tuple[list[str], dict[str, tuple[int, int]], list[str]] | None:
    """(the file's lines, each top-level def, class or one-name assignment -> its [start, end) lines with
    decorators, the import statements' source lines); None when it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    lines = source.splitlines(keepends=True)
    spans, imports = {}, []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            spans[node.name] = (start, node.end_lineno)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            spans[node.targets[0].id] = (node.lineno - 1, node.end_lineno)  # a constant (a compiled pattern)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append("".join(lines[node.lineno - 1:node.end_lineno]))
    return lines, spans, imports


def _block(lines: list[str], span: tuple[int, int]) -> str:
    text = "".join(lines[span[0]:span[1]])
    return text if text.endswith("\n") else text + "\n"


def _same(a: str, b: str) -> bool:
    try:
        return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except SyntaxError:
        return a == b


def swap(base: str, donor: str, names: list[str]) -> str | None:
    """`base` with the top-level defs `names` replaced by `donor`'s, plus the donor's defs they use and imports
    that the base does not have; None when either does not parse or one of the names is missing from either."""
    b, d = _defs(base), _defs(donor)
    if b is None or d is None:
        return None
    lines, spans, imports = b
    dlines, dspans, dimports = d
    if any(n not in spans or n not in dspans for n in names):
        return None
    extra = "".join("\n\n" + _block(dlines, dspans[n]) for n in _needed(dlines, dspans, names) if n not in spans)
    out = list(lines)
    for n in sorted(names, key=lambda n: -spans[n][0]):  # from the bottom up, so earlier spans stay valid
        start, end = spans[n]
        out[start:end] = [_block(dlines, dspans[n]) + (extra if n == names[0] else "")]
    missing = [i for i in dimports if i not in imports]
    text = "".join(out)
    if missing:
        at = _import_line(base)
        head = "".join(i if i.endswith("\n") else i + "\n" for i in missing)
        text_lines = text.splitlines(keepends=True)
        text = "".join(text_lines[:at] + [head] + text_lines[at:])
    try:
        ast.parse(text)
    except SyntaxError:
        return None
    return text


def _needed(lines: list[str], spans: dict[str, tuple[int, int]], names: list[str]) -> list[str]:
    """The donor's top-level defs that `names` use, directly or through each other, in file order."""
    seen, todo = set(names), list(names)
    while todo:
        used = {n.id for n in ast.walk(ast.parse(_block(lines, spans[todo.pop()]))) if isinstance(n, ast.Name)}
        for n in used & spans.keys() - seen:
            seen.add(n)
            todo.append(n)
    return [n for n in spans if n in seen and n not in names]


def _import_line(source: str) -> int:
    """Where new imports go: after the module docstring and the existing imports."""
    tree = ast.parse(source)
    at = 0
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or \
                (at == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            at = node.end_lineno
        else:
            break
    return at


def single_swaps(base: str, donors: list[str]) -> list[tuple[str, int, str]]:
    """(mixed source, donor index, the def taken) for each def where a donor differs from the base (and the mix
    is not the donor itself, already checked), in the donors' order; at most MAX_MIXES, none repeated."""
    b = _defs(base)
    if b is None:
        return []
    blines, bspans, _ = b
    out, seen = [], {base}
    for i, donor in enumerate(donors):
        d = _defs(donor)
        if d is None:
            continue
        dlines, dspans, _ = d
        for n in bspans:
            if n not in dspans or \
                    _same(_block(blines, bspans[n]), _block(dlines, dspans[n])):
                continue
            mixed = swap(base, donor, [n])
            if mixed is not None and mixed not in seen and not _same(mixed, donor):  # not the donor again
                seen.add(mixed)
                out.append((mixed, i, n))
            if len(out) >= MAX_MIXES:
                return out
    return out


def combined(base: str, better: list[tuple[str, str]]) -> str | None:
    """`base` with each (donor, def) swap applied, one donor per def (the first listed wins); None when fewer
    than two defs move or the result does not parse."""
    chosen: dict[str, str] = {}
    for donor, name in better:
        chosen.setdefault(name, donor)
    if len(chosen) < 2:
        return None
    text: str | None = base
    for name, donor in chosen.items():
        text = swap(text, donor, [name]) if text is not None else None
    return text

"""The functions and methods of a Python module, addressed by the line numbers ast gives them: splice, focus,
mutants, members, move and windows all cut a module's text at its definitions."""
from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator

ROW = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def source_rows(text: str) -> list[str]:
    """Lines as ast counts them, ends kept: str.splitlines also splits at form feeds and other separators that ast
    does not count, which shifts every later line."""
    return ROW.findall(text)


def walk_definitions(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, ast.stmt]]:
    """(qualified name, node) of each function and method, nested classes included, in source order."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from walk_definitions(node.body, f"{prefix}{node.name}.")


def start_line(node: ast.stmt) -> int:
    """A statement's first line, its decorators included."""
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
    """The definition's lines as written, or None when the source lacks it or does not parse."""
    spans = definitions(source)
    if not spans or qualname not in spans:
        return None
    first, last = spans[qualname]
    return "".join(source_rows(source)[first - 1:last])

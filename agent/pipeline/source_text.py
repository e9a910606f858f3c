"""A module's text addressed by the positions ast gives (lines and UTF-8 byte columns): the spans one-expression
changes replace, keeping the rest of the file as it was spelled (mutants.py)."""
from __future__ import annotations

import ast

from agent.pipeline.definitions import source_rows

ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)
TIGHT = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)  # `x + 1` keeps their meaning


class SourceText:
    """A module's text addressed by ast positions (UTF-8 byte columns)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.rows = source_rows(source)
        self.starts = [0]
        for row in self.rows:
            self.starts.append(self.starts[-1] + len(row))

    def span(self, node: ast.AST) -> tuple[int, int] | None:
        try:
            first, last = self.rows[node.lineno - 1], self.rows[node.end_lineno - 1]
            a = self.starts[node.lineno - 1] + len(first.encode("utf-8")[:node.col_offset].decode("utf-8"))
            b = self.starts[node.end_lineno - 1] + len(last.encode("utf-8")[:node.end_col_offset].decode("utf-8"))
        except (AttributeError, TypeError, IndexError, UnicodeDecodeError):
            return None
        return a, b

    def text(self, node: ast.AST) -> str:
        span = self.span(node)
        return self.source[span[0]:span[1]] if span else ast.unparse(node)

    def grouped(self, node: ast.expr, sums: bool = False) -> str:
        """The node's text, in parentheses unless it binds at least as tightly as `+` (sums) or is an atom."""
        tight = isinstance(node, ATOMS) or (sums and isinstance(node, ast.BinOp) and isinstance(node.op, TIGHT))
        return self.text(node) if tight else f"({self.text(node)})"

    def exchanged(self, node: ast.AST, one: ast.AST, other: ast.AST) -> str | None:
        """The node's text with two of its parts (in order, not overlapping) swapped."""
        spans = [self.span(n) for n in (node, one, other)]
        if None in spans:
            return None
        (a, b), (a1, b1), (a2, b2) = spans
        src = self.source
        return src[a:a1] + src[a2:b2] + src[b1:a2] + src[a1:b1] + src[b2:b]

    def operators(self, node: ast.AST, parts: list[ast.AST], old: list[str], new: list[str]) -> str | None:
        """The node's text with the operator between parts[i] and parts[i + 1] spelled new[i] instead of old[i]
        (None when the text between them is not just that operator and brackets)."""
        span = self.span(node)
        spans = [self.span(p) for p in parts]
        if span is None or None in spans:
            return None
        out, at = [], span[0]
        for (_, end), (start, _), was, now in zip(spans, spans[1:], old, new):
            gap = self.source[end:start]
            if gap.strip(" ()\t\n\\") != was:
                return None
            out += [self.source[at:end], gap.replace(was, now, 1)]
            at = start
        return "".join(out) + self.source[at:span[1]]

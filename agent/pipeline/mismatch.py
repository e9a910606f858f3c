"""A failing equality assertion said in plain words: which expression gave which value, and what the test expects.

A small model shown pytest's report (the assertion, `E` lines, a character diff) often rewrites the line the
failure points at without changing what it computes; the same facts as one sentence name the wrong value.
"""
from __future__ import annotations

import ast
import re

SOURCE = re.compile(r"^>\s+(.+)$")  # pytest: the failing line of the test
ERROR = re.compile(r"^E\s+(?:AssertionError:\s*)?(.+)$")
DIFFER = re.compile(r"^\w+ differ:\s*")  # unittest's "Lists differ: [1] != [2]"
EQUALS = {"assertEqual", "assertEquals", "assertListEqual", "assertDictEqual", "assertTupleEqual",
          "assertSequenceEqual", "assertSetEqual", "assertAlmostEqual", "assertCountEqual"}
MAX_VALUE = 200  # a longer value is left to the report itself


def assertion_mismatch(output: str) -> str:
    """'`slugify("Hello World")` returns 'Hello-World', but the test expects 'hello-world'.' for the first failing
    `assert A == B` or assertEqual(A, B) in a pytest report whose values are shown; "" otherwise."""
    found = failed_comparison(output)
    return _sentence(*found[:3]) if found else ""


def failed_comparison(output: str) -> tuple[str, str, str, str] | None:
    """(the compared expression as the test wrote it, the value it gave, the value the test expects as shown, and
    as written) for the first failing `assert A == B` or assertEqual(A, B) of a pytest report showing the values."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        source = SOURCE.match(line)
        if source is None:
            continue
        sides = _compared(source.group(1).strip())
        error = next((m.group(1).strip() for ln in lines[i + 1:i + 8] if (m := ERROR.match(ln))), None)
        values = _values(error) if error else None
        if sides is None or values is None:
            return None
        (left, right), (got_left, got_right) = sides, values
        if _literal(right) and not _literal(left):
            return left, got_left, got_right, right
        if _literal(left) and not _literal(right):
            return right, got_right, got_left, left
        return None
    return None


def _compared(statement: str) -> tuple[str, str] | None:
    """The source of both sides of `assert A == B` or `self.assertEqual(A, B)`."""
    try:
        node = ast.parse(statement).body[0]
    except (SyntaxError, ValueError, IndexError):
        return None
    if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1 \
            and isinstance(node.test.ops[0], ast.Eq):
        return _segment(statement, node.test.left), _segment(statement, node.test.comparators[0])
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and len(node.value.args) >= 2:
        func = node.value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in EQUALS:
            return _segment(statement, node.value.args[0]), _segment(statement, node.value.args[1])
    return None


def _segment(source: str, node: ast.expr) -> str:
    """The expression as the test wrote it (its quotes and spacing)."""
    return ast.get_source_segment(source, node) or ast.unparse(node)


def _values(error: str) -> tuple[str, str] | None:
    """Both values of pytest's `assert X == Y` line or unittest's `X != Y` message, as shown."""
    if error.startswith("assert "):
        sides = _compared(error)
        if sides is None:
            return None
        return sides if all(_literal(s) for s in sides) else None
    parts = DIFFER.sub("", error).split(" != ")
    if len(parts) != 2 or not all(_literal(p) for p in parts):
        return None
    return parts[0].strip(), parts[1].strip()


NOT_LITERAL = object()


def literal_value(text: str) -> object:
    """The Python value a repr writes, or NOT_LITERAL."""
    try:
        return ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return NOT_LITERAL


def _literal(text: str) -> bool:
    return literal_value(text) is not NOT_LITERAL


def _sentence(expression: str, got: str, expected: str) -> str:
    if max(len(expression), len(got), len(expected)) > MAX_VALUE or got == expected:
        return ""
    return f"In short: `{expression}` returns {got}, but the test expects {expected}."

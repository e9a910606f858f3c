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
    if not found or TRUNCATED.search(found[1]) or TRUNCATED.search(found[2]):  # a cut value is not the value
        return ""
    sentence, where = _sentence(*found[:3]), difference(found[1], found[2])
    return " ".join(part for part in (sentence or ("In short:" if where else ""), where) if part)


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


def difference(got: str, expected: str) -> str:
    """Where two shown values differ, in a sentence: line endings, a line's leading spaces, the first differing
    line of a text; the items a list lacks or has too many of. "" when no rule says more."""
    a, b = literal_value(got), literal_value(expected)
    if isinstance(a, str) and isinstance(b, str):
        return _text_difference(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return _items_difference(list(a), list(b))
    return ""


TRUNCATED = re.compile(r"\[\d+ chars\]")  # unittest shortens long values: their text is not the value
MAX_LINE = 120


def _text_difference(got: str, expected: str) -> str:
    if got == expected:
        return ""
    for ending, other in (("\r\n", "\n"), ("\n", "\r\n")):
        if ending in got and got.replace(ending, other) == expected.replace(ending, other) and other in expected:
            return f"The result ends its lines with {ending!r}; the test expects {other!r}."
    if got.lower() == expected.lower():
        return "The two differ only in upper and lower case."
    if got.strip() == expected.strip():
        return "The two differ only in spaces or newlines at the start or end."
    rows, wanted = got.split("\n"), expected.split("\n")
    if len(rows) == 1 and len(wanted) == 1:
        return ""
    for i, (row, want) in enumerate(zip(rows, wanted), 1):
        if row == want:
            continue
        if len(row) > MAX_LINE or len(want) > MAX_LINE:
            return f"They first differ at line {i}."
        why = ""
        if row.strip() == want.strip():
            lead_row, lead_want = len(row) - len(row.lstrip()), len(want) - len(want.lstrip())
            why = (f" (the test's line starts with {lead_want} spaces, the result's with {lead_row})"
                   if lead_row != lead_want else " (they differ only in spaces at the end)")
        return f"Line {i} of the result is {row!r}; the test expects {want!r}{why}."
    return f"The result has {len(rows)} lines; the test expects {len(wanted)}."


def _items_difference(got: list, expected: list) -> str:
    if got == expected:
        return ""
    lacks, extra = _without(expected, got), _without(got, expected)
    if not lacks and not extra:
        return "The result has the right items in the wrong order."
    parts = []
    if lacks:
        parts.append(f"lacks {_items(lacks)}")
    if extra:
        parts.append(f"has {_items(extra)}, which the test does not expect")
    return f"The result {', and '.join(parts)}."


def _without(items: list, taken: list) -> list:
    """`items` less one of each item of `taken` (a multiset difference, for unhashable items too)."""
    rest = list(items)
    for item in taken:
        if item in rest:
            rest.remove(item)
    return rest


def _items(items: list) -> str:
    shown = [repr(item) for item in items[:4]] + (["..."] if len(items) > 4 else [])
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _sentence(expression: str, got: str, expected: str) -> str:
    if max(len(expression), len(got), len(expected)) > MAX_VALUE or got == expected:
        return ""
    return f"In short: `{expression}` returns {got}, but the test expects {expected}."

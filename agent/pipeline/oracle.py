"""Algorithmic debugging (Shapiro, 1982) with the model as the oracle. The failing test's calls form a tree; the
model is asked what a callee should return (one short answer, without being shown what it did return), and the
harness compares: a callee whose value differs is descended into, and the deepest call judged wrong is where the
bug is. A 1.5B model that names the wrong file when asked "which file has the bug" can still say that
`parse_price('4.5')` should be 450 cents; the harness sees 405 and knows the bug is in parse_price."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Callable

from agent.pipeline.call_trace import Call
from agent.pipeline.mismatch import NOT_LITERAL, literal_value

MAX_QUESTIONS = 4
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


KINDS = ((bool, "True or False"), ((int, float), "number"), (str, "string"), (list, "list"), (tuple, "tuple"),
         (dict, "dict"), (set, "set"))


def question(call: Call) -> str:
    """The value's kind is said (not the value): asked for "the value", the 1.5B answered a list's length."""
    kind = _kind(_literal(call.returned))
    what = "the value" if kind is None else kind if kind == "True or False" else f"the {kind}"
    return f"What should `{call.shown()}` return? Reply with {what} only."


def answer_start(call: Call) -> str:
    """The reply is given its start, so that what follows is the value: asked plainly, the 1.5B explained its
    steps or wrote the call again."""
    return f"`{call.shown()} == "


def find_wrong_call(calls: list[Call], ask: Callable[[str, Call], str],
                    max_questions: int = MAX_QUESTIONS) -> tuple[Call, str] | None:
    """(the deepest callee judged wrong, the value the model expects), or None when no callee of the test's own
    calls was judged wrong. Only calls whose value is a plain literal are asked about."""
    asked: dict[tuple[str, str], str | None] = {}
    found = None
    frontier = [j for i, c in enumerate(calls) if c.depth == 0 for j in _callees(calls, i)]
    while frontier and len(asked) < max_questions:
        i = frontier.pop(0)
        call = calls[i]
        actual = _literal(call.returned)
        if actual is None or (call.shown(), call.returned) in asked:
            continue
        expected = _answer(ask(question(call), call))
        asked[(call.shown(), call.returned)] = expected
        if expected is not None and _kind(_literal(expected)) == _kind(actual) and _literal(expected) != actual:
            found, frontier = (call, expected), _callees(calls, i)  # wrong: look inside it
    return found


def sentence(call: Call, expected: str) -> str:
    return f"In short: `{call.shown()}` returns {call.returned}, but it should return {expected}."


def definition_lines(path: Path, call: Call) -> list[int]:
    """Where the judged-wrong function is defined in its file (its def line), [] when it is not found there."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    name = call.name.rpartition(".")[2]
    return sorted(n.lineno for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.name == name)[:1]


def _kind(value: object) -> str | None:
    """An answer of another kind than the value (a number for a list) is no verdict."""
    return next((name for types, name in KINDS if isinstance(value, types)), None)


def _callees(calls: list[Call], i: int) -> list[int]:
    depth, out = calls[i].depth, []
    for j in range(i + 1, len(calls)):
        if calls[j].depth <= depth:
            break
        if calls[j].depth == depth + 1:
            out.append(j)
    return out


def _literal(text: str | None) -> object | None:
    """The Python value a repr or an answer writes; None when it is not a plain literal."""
    value = NOT_LITERAL if text is None else literal_value(text.strip())
    return None if value is NOT_LITERAL else value


def _answer(text: str) -> str | None:
    """The value in a short reply ("450", "`450`", "450 cents", "It should return 450."), as literal text."""
    line = next((ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("```")), "")
    line = line.strip("`").rstrip(".").strip()
    if _literal(line) is not None:
        return line
    inner = re.search(r"`([^`]+)`", text)
    if inner and _literal(inner.group(1)) is not None:
        return inner.group(1).strip()
    number = NUMBER.findall(line)
    return number[-1] if len(number) == 1 else None

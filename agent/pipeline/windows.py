"""Parts of files in the pipeline: the numbered region around a request's hits (what the model is shown) and the
window of lines it rewrites whole (spliced back into the file)."""
from __future__ import annotations

import ast
import difflib
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.core import model_text as mt
from agent.pipeline import members
from agent.pipeline.checks import top_level_names
from agent.pipeline.config_diff import undo_collateral
from agent.pipeline.definitions import start_line
from agent.pipeline.imports import IMPORT_LINE, add_missing_imports, with_imports
from tools._parse_guard import parse_problem

REPLY_TOKENS = 256  # beyond twice the rewritten text's tokens
PROSE = frozenset((".md", ".markdown", ".rst", ".txt"))
NEW_FILE_TOKENS = 768  # a reply that runs out is refused (a line repeated until the limit), so a new file needs room
CUT_OFF = ("max_tokens", "runaway")  # a reply that ended at the limit or in a loop holds no whole file


def reply_content(opening: str, text: str, path: Path, original: str | None) -> str | None:
    """The file text in a reply that continued `opening` (a fence): the reply read as the block's body, or a
    block inside it; the first that parses wins (a stray fence inside once left only the file's second half)."""
    order = (text, opening + text) if text.lstrip().startswith("```") else (opening + text, text)  # a re-opened fence
    fence, _, head = opening.partition("\n")
    if head.strip() and text.lstrip().startswith(head.strip()):  # the given head written again
        order += (f"{fence}\n{text.lstrip()}",)
    readings = [_undiffed(r, original, path) for r in dict.fromkeys(mt.fenced_block(t) for t in order) if r is not None]
    parsing = [r for r in readings if parse_problem(path, original, r) is None]
    return (parsing or readings or [None])[0]


def _undiffed(text: str, original: str | None, path: Path) -> str:
    """A reply that copied a new file's diff from a retry note ("+" before its lines) as the file it shows (not in
    prose files, where "+ " starts a list item)."""
    def added(t: str) -> bool:
        lines = [ln for ln in t.splitlines() if ln.strip()]
        return len(lines) >= 2 and sum(ln.startswith("+") for ln in lines) >= 0.8 * len(lines)
    if path.suffix.lower() in PROSE or not added(text) or added(original or ""):
        return text
    return "".join(ln[1:] if ln.startswith("+") else ln for ln in text.splitlines(keepends=True))


@dataclass(frozen=True)
class Shape:
    """What the model writes in its fenced block: the whole file, a window of lines, or only an addition; with
    `path`, a Python result gets the imports it forgot from `modules` (imports.add_missing_imports)."""
    window: tuple[int, int] | None = None
    append: bool = False
    path: Path | None = None
    root: Path | None = None
    modules: tuple[Path, ...] = ()
    head: str = ""  # the file up to its first stub's body: given to the model as the start of its reply
    request: str = ""  # a config file's changes that the request does not ask for are undone where they can be
    into: str = ""  # with append: the class whose body the addition (a method) ends

    def opening(self, name: str) -> str:
        """How the reply starts: the fence, then the head the model would only have copied."""
        return mt.fence_open(name) + self.head

    def shown(self, original: str | None) -> str:
        """The text the reply rewrites."""
        return lines(original, self.window) if self.window else original or ""

    def budget(self, count_tokens: Callable[[str], int], original: str | None) -> int:
        """Tokens a reply may take: twice what it rewrites, and room for a new file (a README, a Dockerfile)."""
        floor = NEW_FILE_TOKENS if original is None else 0
        return max(floor, REPLY_TOKENS + 2 * count_tokens(self.rewritten(original)))

    def rewritten(self, original: str | None) -> str:
        """The part of shown() the reply decodes (its length sets the token budget): what follows the head."""
        return self.shown(original)[len(self.head):]

    def compose(self, original: str | None, block: str) -> str:
        """The file the reply makes."""
        content = self._compose(original, block)
        if original is not None and not self.append:
            content = minimal(original, content)
            if self.path is not None and self.window is None:
                content = undo_collateral(self.request, self.path, original, content)
        if self.path is None or self.root is None:
            return content
        return add_missing_imports(content, self.path, self.root, list(self.modules))

    def _compose(self, original: str | None, block: str) -> str:
        if self.window is not None:
            return splice(original, self.window, block)
        if self.append and self.into and original is not None:
            return members.inserted(original, self.into, block)
        if self.append and original is not None:
            before, after = top_level_names(original), top_level_names(block)
            if before and after is not None and set(before) <= set(after):
                return block  # it wrote the whole file after all
            return appended(original, block)
        return block


STUB_REQUEST = re.compile(r"\b(stub\w*|implement\w*|NotImplemented\w*|fill(?:s|ed|ing)?\s+in|complete|finish|"
                          r"missing\s+(?:function\s+)?bod(?:y|ies)|not\s+(?:yet\s+)?(?:written|implemented|done)|"
                          r"write\s+(?:them|it|the\s+(?:functions?|methods?|bod(?:y|ies))))\b", re.IGNORECASE)


def stub_head(original: str | None, request: str, path: Path) -> str:
    """The lines of a Python file before its first stub body, when the request asks for stubs to be implemented;
    "" otherwise. Decoding that head again would only copy it, a token at a time per candidate."""
    starts = stub_starts(original, path) if STUB_REQUEST.search(request) else []
    return "".join((original or "").splitlines(keepends=True)[:min(starts) - 1]) if starts else ""


def stub_starts(original: str | None, path: Path) -> list[int]:
    """The first lines of a Python file's stub bodies: functions whose only statement after the docstring is
    `pass`, `...` or `raise NotImplementedError` (on a line of its own)."""
    if original is None or path.suffix != ".py":
        return []
    try:
        tree = ast.parse(original)
    except (SyntaxError, ValueError):
        return []
    starts = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if _docstring(node.body[0]) else node.body
            if not body:
                starts.append(node.body[0].end_lineno + 1)
            elif len(body) == 1 and _stub_statement(body[0]) and body[0].lineno > node.lineno:
                starts.append(body[0].lineno)
    return starts


def opening_line(original: str | None, path: Path) -> str:
    """A JSON file's first line when it is only the opening bracket, which any rewrite keeps: given as the start of
    the reply (the 1.5B's greedy rewrite of such a file once dropped its "{" every time, and the parse guard
    refused it)."""
    if original is None or path.suffix.lower() != ".json":
        return ""
    first = original.splitlines(keepends=True)[:1]
    return first[0] if first and first[0].strip() in ("{", "[") and first[0].endswith("\n") else ""


def _docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _stub_statement(node: ast.stmt) -> bool:
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis:
        return True
    if isinstance(node, ast.Raise) and node.exc is not None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def region(text: str, lines: list[int], context: int) -> str:
    """Numbered lines around `lines` (1-based), as Read shows them; the file's start when there are none."""
    rows = text.splitlines()
    keep: set[int] = set()
    for n in lines or [1]:
        keep.update(range(max(1, n - context), min(len(rows), n + context) + 1))
    out, last = [], 0
    for n in sorted(keep):
        if last and n != last + 1:
            out.append("...")
        out.append(f"{n:>6}\t{rows[n - 1]}")
        last = n
    return "\n".join(out)


WINDOW_CONTEXT = 15  # lines kept around a long file's hits when only a window of it is rewritten
WINDOW_MAX = 80


def window(text: str, hits: list[int], python: bool = False) -> tuple[int, int] | None:
    """Lines (first, last) around the first cluster of hits; None without hits (then one Edit call). In Python,
    the top-level definitions that hold the cluster and nothing else: with 15 lines either side, the 1.5B
    changed the neighbouring functions too (docs/EVALS.md)."""
    if not hits:
        return None
    if python and (spans := _definitions(text, hits)):
        return spans
    total = text.count("\n") + (0 if text.endswith("\n") else 1)
    first = max(1, hits[0] - WINDOW_CONTEXT)
    last = hits[0]
    for h in hits[1:]:
        if h - first > WINDOW_MAX - 2 * WINDOW_CONTEXT:
            break
        last = h
    return first, min(total, last + WINDOW_CONTEXT)


def lines(text: str | None, window: tuple[int, int]) -> str:
    rows = (text or "").splitlines(keepends=True)
    return "".join(rows[window[0] - 1:window[1]])


def splice(text: str | None, window: tuple[int, int], new: str) -> str:
    """`text` with lines window[0]..window[1] replaced by `new`."""
    rows = (text or "").splitlines(keepends=True)
    old = "".join(rows[window[0] - 1:window[1]])
    new = new.rstrip("\n") + old[len(old.rstrip("\n")):]  # a fenced block loses the window's trailing blank lines
    return "".join(rows[:window[0] - 1]) + new + "".join(rows[window[1]:])


def appended(original: str, addition: str) -> str:
    """`addition` after the file's last line, two blank lines between (a new top-level definition); the
    imports it opens with join the file's own imports (those it already has are not repeated)."""
    rows = _unbound_tests(textwrap.dedent(addition)).strip("\n").splitlines()  # top-level code: no copied indent
    lead = 0
    while lead < len(rows) and (IMPORT_LINE.match(rows[lead]) or not rows[lead].strip()):
        lead += 1
    head = with_imports(original, [r for r in rows[:lead] if r.strip()])
    body = "\n".join(rows[lead:]).strip("\n")
    return head.rstrip("\n") + ("\n\n\n" + body if body else "") + "\n"


def _unbound_tests(code: str) -> str:
    """Top-level `def test_x(self):` whose body never uses self, as `def test_x():` (the 1.5B wrote pytest tests
    as methods at the end of a file without a class, and pytest found no fixture named self)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    rows = code.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test") and \
                [a.arg for a in node.args.args[:1]] == ["self"] and \
                not any(isinstance(n, ast.Name) and n.id == "self" for b in node.body for n in ast.walk(b)):
            i = node.lineno - 1
            rows[i] = re.sub(r"\(\s*self\s*(?:,\s*)?", "(", rows[i], count=1)
    return "".join(rows)


def _definitions(text: str, hits: list[int]) -> tuple[int, int] | None:
    """The span of the top-level statements holding the first cluster of hits (decorators included)."""
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        return None
    spans = [(start_line(n), n.end_lineno or n.lineno) for n in body]
    holding = [span for span in spans if any(span[0] <= h <= span[1] for h in hits)]
    if not holding:
        return None
    first, last = holding[0]
    for start, end in holding[1:]:
        if end - first >= WINDOW_MAX:
            break
        last = end
    return (first, last) if last - first < WINDOW_MAX else None


def minimal(original: str, content: str) -> str:
    """`content` with the changes that are only blank lines or trailing spaces undone: a rewrite that also
    re-spaced the file made a one-word fix look like more than it was. Lines are compared in units (a line
    with the blank lines after it); a kept or one-for-one replaced unit keeps the original's blank lines, except
    before new code, where the reply's spacing stays."""
    old, new = _units(original), _units(content)
    matcher = difflib.SequenceMatcher(None, [u[0].rstrip() for u in old], [u[0].rstrip() for u in new],
                                      autojunk=False)
    out: list[str] = []
    ops = matcher.get_opcodes()
    for k, (op, i1, i2, j1, j2) in enumerate(ops):
        if op == "equal":
            out += ["".join(u) for u in old[i1:i2]]
            if k + 1 < len(ops) and ops[k + 1][0] != "delete":  # new code follows: its spacing is the reply's
                out[-1] = old[i2 - 1][0] + "".join(new[j2 - 1][1:])
        elif op == "replace" and i2 - i1 == j2 - j1:
            out += [n[0] + "".join(o[1:]) for o, n in zip(old[i1:i2], new[j1:j2])]
        else:
            out += ["".join(u) for u in new[j1:j2]]
    text = "".join(out)
    return text if text.endswith("\n") or not content.endswith("\n") else text + "\n"


def _units(text: str) -> list[list[str]]:
    """Lines grouped as [a line, the blank lines after it]; leading blank lines form a unit of their own."""
    units: list[list[str]] = []
    for row in text.splitlines(keepends=True):
        if row.strip() or not units:
            units.append([row])
        else:
            units[-1].append(row)
    return units

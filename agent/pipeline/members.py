"""A new method for an existing class: the model writes only the method, the harness puts it at the end of the
class body. Asked to rewrite a short file to "add a method count() to Cart", the 1.5B copied the file unchanged,
then made an unrelated Edit (docs/EVALS.md, stop 38)."""
from __future__ import annotations

import ast
import re
import textwrap

from agent.pipeline.definitions import source_rows, start_line
from agent.pipeline.imports import IMPORT_LINE, with_imports

# "add a method count() to Cart", "give Shelf a `size` property"; not "fix the add method" (a verb after "the")
ADDS_MEMBER = re.compile(r"(?<!\bthe\s)(?<!\bits\s)(?<!\ban\s)(?<!\ba\s)\b(?:add|create|write|give)\w*\b[^.\n]{0,80}?"
                         r"\b(?:methods?|propert(?:y|ies)|classmethod|staticmethod)\b", re.IGNORECASE)
NAMED = re.compile(r"`?\b([A-Za-z_]\w*)(?:\(\))?`?")


def target_class(prompt: str, original: str | None) -> str:
    """The class a request adds a method to: one the request names (or the file's only class), when the method it
    names is not there yet; "" when the request is not such an addition."""
    if original is None or not ADDS_MEMBER.search(prompt):
        return ""
    classes = _classes(original)
    if not classes:
        return ""
    words = {m.group(1) for m in NAMED.finditer(prompt)}
    named = [c for c in classes if c in words]
    if len(named) != 1 and not (not named and len(classes) == 1):
        return ""
    cls = named[0] if named else next(iter(classes))
    called = set(re.findall(r"\b([A-Za-z_]\w*)\(\)", prompt)) | set(re.findall(r"`([A-Za-z_]\w*)`", prompt)) | \
        set(re.findall(r"\b([A-Za-z_]\w*)`?\s+method\b", prompt))
    return "" if called & classes[cls] else cls  # the method exists: a change to it, not an addition


def inserted(original: str, cls: str, block: str) -> str:
    """`original` with the methods in `block` at the end of class `cls` (re-indented to its body); the imports the
    block opens with join the file's. A block holding the whole file is the file; one holding the class keeps the
    members the class lacked."""
    try:
        tree = ast.parse(original)
    except (SyntaxError, ValueError):
        return original
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        return original
    rows = textwrap.dedent(block).strip("\n").splitlines()
    lead = 0
    while lead < len(rows) and (IMPORT_LINE.match(rows[lead]) or not rows[lead].strip()):
        lead += 1
    imports, body = [r for r in rows[:lead] if r.strip()], "\n".join(rows[lead:])
    try:
        written = ast.parse(body).body
    except (SyntaxError, ValueError):
        written = None
    if written is not None:
        names = {n.name for n in tree.body if hasattr(n, "name")}
        if names and names <= {n.name for n in written if hasattr(n, "name")}:
            return block  # it wrote the whole file after all
        same = next((n for n in written if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if same is not None:  # the class again: only the members it did not have
            have = set(_members(node))
            lines = body.splitlines()
            body = "\n\n".join(textwrap.dedent("\n".join(lines[start_line(m) - 1:m.end_lineno]))
                               for m in same.body if getattr(m, "name", None) and m.name not in have)
            if not body:
                return original
    text = with_imports(original, imports) if imports else original
    lines = source_rows(text)
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef) and n.name == cls)
    indent = re.match(r"[ \t]*", lines[node.body[0].lineno - 1]).group(0) or "    "
    method = textwrap.indent(textwrap.dedent(body).strip("\n"), indent)
    end = node.end_lineno
    before, after = "".join(lines[:end]), "".join(lines[end:])
    return before.rstrip("\n") + "\n\n" + method + "\n" + ("\n\n" + after.lstrip("\n") if after.strip() else "")


def _classes(text: str) -> dict[str, set[str]]:
    """Top-level classes -> the names defined in their bodies."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    return {n.name: set(_members(n)) for n in tree.body if isinstance(n, ast.ClassDef)}


def _members(node: ast.ClassDef) -> list[str]:
    out = []
    for m in node.body:
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(m.name)
        elif isinstance(m, (ast.Assign, ast.AnnAssign)):
            targets = m.targets if isinstance(m, ast.Assign) else [m.target]
            out += [t.id for t in targets if isinstance(t, ast.Name)]
    return out


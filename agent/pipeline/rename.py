"""A rename of a Python identifier (function, class, method, constant, parameter) across the project, done by the
harness with rope's scope-aware rename as an editor does: the definition, its uses, its importers, and for a
parameter the keyword arguments at its call sites. The 1.5B asked to rename a parameter changed its default
instead and pasted one module into another."""
from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.pipeline.checks import is_test_file
from agent.pipeline.localize import project_files
from agent.pipeline.route import KEEP_TESTS, kept_files

KINDS = r"function|method|class|constant|variable|parameter|argument|param|arg|attribute|field|setting"
Q = r"[`'\"]?"
# "rename the constant TIMEOUT_SEC to TIMEOUT_SECONDS in config.py", "rename the Cart method compute_sum to subtotal",
# "rename the keep_ratio parameter of resize in imaging/ops.py to preserve_aspect"
RENAME = re.compile(rf"\brename\s+(?:the\s+)?(?:(?P<owner>(?-i:[A-Z])\w*)(?:'s)?\s+(?=(?:{KINDS})\b))?"
                    rf"(?:(?P<kind>{KINDS})\s+)?{Q}(?P<old>[A-Za-z_]\w*){Q}(?:\(\))?(?:\s+(?P<kind2>{KINDS}))?"
                    rf"(?P<where>(?:\s+(?:of|in|from|on)\s+(?:the\s+)?{Q}[\w./]+(?:\(\))?{Q}"
                    rf"(?:\s+(?:function|method|class|module|file))?)*)\s*(?:\([^)]*\)\s*)?,?\s+to\s+{Q}"
                    rf"(?P<new>[A-Za-z_]\w*){Q}(?!\w|\.\w)", re.IGNORECASE)
OF = re.compile(rf"\b(?:of|in|on)\s+(?:the\s+)?{Q}([A-Za-z_]\w*)\b(?:\(\))?{Q}(?![./]\w)")
# Methods every program calls on built-in values: a `.name` of unknown type is not taken for the project's method.
COMMON = frozenset(n for t in (list, dict, str, set, bytes, int, float, tuple, object) for n in dir(t))


@dataclass
class Rename:
    old: str
    new: str
    texts: dict[Path, str] = field(default_factory=dict)  # new text per file: the definition's file first

    def summary(self, rel: Callable[[Path], str]) -> str:
        return f"Renamed {self.old} to {self.new} in {', '.join(rel(p) for p in self.texts)}"


def plan_rename(prompt: str, root: Path, candidates: list[Path]) -> Rename | None:
    """The rename the request asks for, with every changed file's new text; None when it is not one this can do
    (no single definition found, a file to leave alone would change, rope fails): the model's edits then run."""
    m = RENAME.search(prompt)
    if m is None or m.group("old") == m.group("new"):
        return None
    old, new = m.group("old"), m.group("new")
    kind = (m.group("kind") or m.group("kind2") or "").lower()
    owners = [o for o in [m.group("owner")] + OF.findall(m.group("where") or "") if o and o != old]
    files = [p for p in project_files(root) if p.suffix == ".py"]
    order = list(dict.fromkeys([p.resolve() for p in candidates if p.suffix == ".py"] + files))
    sites = [(path, offset) for path in order for offset in _definitions(path, old, kind, owners)]
    if len({path for path, _ in sites}) != 1 or len(sites) != 1:
        return None  # none, or several: which one is meant is the model's call
    path, offset = sites[0]
    try:
        texts = _rope_rename(root, files, path, offset, new, unsure=_unique_attribute(files, old, kind))
    except Exception:  # rope cannot analyse this project (syntax it does not know, a broken file)
        return None
    keep = set(kept_files(prompt, root)) | ({p for p in texts if is_test_file(p)} if KEEP_TESTS.search(prompt) else set())
    if not texts or path not in texts or keep & texts.keys():
        return None
    return Rename(old, new, {path: texts.pop(path), **texts})


def _definitions(path: Path, old: str, kind: str, owners: list[str]) -> list[int]:
    """Character offsets in `path` of definitions named `old` that fit the request: a def or class (inside an owner
    class when one is named), a module or class constant, or a parameter (of an owner function when named)."""
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    lines = text.splitlines(keepends=True)

    def at(lineno: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8", "replace"))

    parameter = kind in ("parameter", "argument", "param", "arg")
    out = []
    for node, parents in _walk(tree, ()):
        scope = [getattr(p, "name", "") for p in parents]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == old \
                and not parameter and (not owners or any(o in scope for o in owners)):
            line = lines[node.lineno - 1]
            col = re.search(rf"\b(?:def|class)\s+({re.escape(old)})\b", line)
            if col and all(not isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) for p in parents):
                out.append(starts[node.lineno - 1] + col.start(1))
        elif isinstance(node, ast.arg) and node.arg == old and (parameter or owners) and \
                (not owners or any(o in scope for o in owners)):
            out.append(at(node.lineno, node.col_offset))
        elif isinstance(node, ast.Name) and node.id == old and isinstance(node.ctx, ast.Store) and not parameter \
                and all(isinstance(p, (ast.Module, ast.ClassDef, ast.Assign, ast.AnnAssign)) for p in parents) \
                and (not owners or any(o in scope for o in owners)):
            out.append(at(node.lineno, node.col_offset))
    return out[:1] if len(set(out)) == 1 else out


def _walk(node: ast.AST, parents: tuple) -> list[tuple[ast.AST, tuple]]:
    out = [(node, parents)]
    for child in ast.iter_child_nodes(node):
        out += _walk(child, parents + (node,))
    return out


def _unique_attribute(files: list[Path], old: str, kind: str):
    """For a method or attribute: take `x.old` of a type rope cannot infer as the one renamed, when the project
    defines `old` once and built-in values have no such method; otherwise leave such uses alone."""
    if kind in ("parameter", "argument", "param", "arg") or old in COMMON:
        return None
    count = 0
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        count += sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == old
                     for n in ast.walk(tree))
    return (lambda occurrence: True) if count == 1 else None


def _rope_rename(root: Path, files: list[Path], path: Path, offset: int, new: str, unsure) -> dict[Path, str]:
    """rope's rename at `offset` of `path` over the project's Python files: new text per changed file."""
    from rope.base.project import Project  # here, not at the top: 0.1 s of imports
    from rope.refactor.rename import Rename as RopeRename  # that only a rename needs

    with warnings.catch_warnings():  # rope's own use of a function it deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        project = Project(str(root), ropefolder=None)
    try:
        def resource(p: Path):
            return project.get_resource(p.relative_to(root).as_posix())
        changes = RopeRename(project, resource(path), offset).get_changes(
            new, docs=True, unsure=unsure, resources=[resource(p) for p in files])
        out: dict[Path, str] = {}
        stack = [changes]
        while stack:
            change = stack.pop(0)
            if hasattr(change, "changes"):
                stack[:0] = list(change.changes)
            elif hasattr(change, "new_contents"):
                out[(root / change.resource.path).resolve()] = change.new_contents
        return out
    finally:
        project.close()

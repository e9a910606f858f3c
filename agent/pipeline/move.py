"""A move of a top-level function or class between two Python modules of one directory, done by the harness
as an editor's refactoring is: the definition is cut from its module and appended to the other with the imports
it uses; the old module imports it back where anything still reaches it there; modules that import it by name
from the old one import it from the new one. The 1.5B asked for a move copied both files unchanged."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent.pipeline.checks import is_test_file
from agent.pipeline.definitions import source_rows, start_line
from agent.pipeline.imports import module_bindings
from agent.pipeline.localize import project_files
from agent.pipeline.route import KEEP_TESTS

# "move slugify from views.py to text_utils.py", "move the class Cart out of shop.py into cart.py", "move `f` to b.py"
MOVE_NAME = re.compile(r"\bmove\s+(?:the\s+)?(?:(?:function|class|helper|def)\s+)?[`'\"]?([A-Za-z_]\w*)[`'\"]?"
                       r"(?:\(\))?(?:\s+(?:function|class|helper))?\s+(?:(?:from|out\s+of|in)\s+[`'\"]?([\w./-]+\.py)"
                       r"[`'\"]?\s+)?(?:in)?to\s+(?:a\s+new\s+(?:module|file)\s+)?[`'\"]?([\w./-]+\.py)\b",
                       re.IGNORECASE)
IMPORT_BACK = re.compile(r"\bimports?\s+it\b", re.IGNORECASE)  # "and have views.py import it from there"
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class Move:
    name: str
    source: Path
    dest: Path
    texts: dict[Path, str] = field(default_factory=dict)  # new text per file: the destination first

    @property
    def importers(self) -> list[Path]:
        return [p for p in self.texts if p not in (self.source, self.dest)]

    def summary(self, rel: Callable[[Path], str]) -> str:
        """"Moved slugify from views.py to text_utils.py; imports updated in feed.py"."""
        others = f"; imports updated in {', '.join(rel(p) for p in self.importers)}" if self.importers else ""
        return f"Moved {self.name} from {rel(self.source)} to {rel(self.dest)}{others}"


def plan_move(prompt: str, root: Path, candidates: list[Path]) -> Move | None:
    """The move the request asks for, with every file's new text; None when it is not a move this can do (the
    model's edit step then runs as before)."""
    m = MOVE_NAME.search(prompt)
    if m is None:
        return None
    name, dest = m.group(1), (root / m.group(3)).resolve()
    source = (root / m.group(2)).resolve() if m.group(2) else _definer(name, candidates, dest)
    if source is None or source == dest or source.parent != dest.parent or not source.is_file():
        return None
    try:
        src_text = source.read_text(encoding="utf-8")
        dest_text = dest.read_text(encoding="utf-8") if dest.exists() else ""
        src_tree, dest_tree = ast.parse(src_text), ast.parse(dest_text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    node = next((n for n in src_tree.body if isinstance(n, DEFS) and n.name == name), None)
    src_names, dest_names = module_bindings(src_tree), module_bindings(dest_tree)
    if node is None or src_names is None or dest_names is None or name in dest_names:
        return None  # not defined there, already defined here, or a star import hides what either binds
    lines = source_rows(src_text)
    start = start_line(node) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):  # a comment above it goes with it
        start -= 1
    block = "".join(lines[start:node.end_lineno]).rstrip() + "\n"
    needed = _free_names(node)
    imports = {n: stmt for stmt in src_tree.body if isinstance(stmt, (ast.Import, ast.ImportFrom))
               for n in _bound_by(stmt)}
    if any(n in needed for n in src_names - imports.keys() - {name}):
        return None  # it uses the old module's own code: the two modules would import each other
    carried = [stmt for stmt in src_tree.body if isinstance(stmt, (ast.Import, ast.ImportFrom))
               and _bound_by(stmt) & needed and not _bound_by(stmt) <= dest_names]
    new_dest = _add_lines(dest_text, dest_tree, [_import_text(s, needed) for s in carried])
    new_dest = new_dest.rstrip("\n") + ("\n\n\n" if new_dest.strip() else "") + block
    rest = _collapse("".join(lines[:start]), "".join(lines[node.end_lineno:]))
    rest = _drop_unused(rest, needed)
    dest_mod, src_mod = dest.stem, source.stem
    texts: dict[Path, str] = {dest: new_dest}
    leaning = bool(IMPORT_BACK.search(prompt))
    reached = False  # something reaches the name through the old module
    for path in project_files(root):
        if path.suffix != ".py" or path in (source, dest):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        pattern = re.compile(rf"^(\s*from\s+(?:[\w.]*\.)?){re.escape(src_mod)}(\s+import\s+){re.escape(name)}"
                             rf"(\s*(?:#.*)?)$", re.MULTILINE)
        changed = text if (is_test_file(path) and KEEP_TESTS.search(prompt)) else \
            pattern.sub(lambda g: f"{g.group(1)}{dest_mod}{g.group(2)}{name}{g.group(3)}", text)
        if changed != text:
            texts[path] = changed
        reached = reached or bool(re.search(rf"\b{re.escape(src_mod)}\.{re.escape(name)}\b|\bfrom\s+(?:[\w.]*\.)?"
                                            rf"{re.escape(src_mod)}\s+import\b[^\n]*\b{re.escape(name)}\b", changed))
    if leaning or reached or name in _loaded(rest):
        package = (source.parent / "__init__.py").exists()
        rest = _add_lines(rest, ast.parse(rest), [f"from {'.' if package else ''}{dest_mod} import {name}"])
    texts[source] = rest
    return Move(name, source, dest, {dest: texts.pop(dest), source: texts.pop(source), **texts})


def _definer(name: str, candidates: list[Path], dest: Path) -> Path | None:
    """The one candidate module that defines `name` at top level."""
    found = []
    for path in dict.fromkeys(candidates):
        if path == dest or path.suffix != ".py" or not path.is_file():
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        if any(isinstance(n, DEFS) and n.name == name for n in tree.body):
            found.append(path.resolve())
    return found[0] if len(found) == 1 else None


def _bound_by(stmt: ast.Import | ast.ImportFrom) -> set[str]:
    return {(a.asname or a.name).split(".")[0] for a in stmt.names}


def _free_names(node: ast.AST) -> set[str]:
    """Names the definition loads that it does not bind itself (module-level names it depends on)."""
    loaded = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    bound |= {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
    bound |= {d.name for d in ast.walk(node) if isinstance(d, DEFS) and d is not node}
    return loaded - bound


def _loaded(text: str) -> set[str]:
    try:
        return {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    except (SyntaxError, ValueError):
        return set()


def _import_text(stmt: ast.Import | ast.ImportFrom, needed: set[str]) -> str:
    """The import statement with only the names the moved code uses."""
    names = [a for a in stmt.names if (a.asname or a.name).split(".")[0] in needed]
    return ast.unparse(type(stmt)(**{**{f: getattr(stmt, f) for f in stmt._fields}, "names": names}))


def _add_lines(text: str, tree: ast.Module, new: list[str]) -> str:
    """`new` import lines after the module's last top-level import (or its docstring, or at the top)."""
    if not new:
        return text
    lines = source_rows(text)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    docstring = tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant) \
        and isinstance(tree.body[0].value.value, str)
    at = imports[-1].end_lineno if imports else tree.body[0].end_lineno if docstring else 0
    head = "".join(lines[:at])
    if head and not head.endswith("\n"):
        head += "\n"
    tail = "".join(lines[at:])
    gap = "\n\n" if not imports and tail.strip() and not tail.startswith("\n") else ""
    return head + "".join(f"{line}\n" for line in new) + gap + tail


def _collapse(before: str, after: str) -> str:
    """The two sides of a cut joined with at most two blank lines between them."""
    if not before.strip():
        return after.lstrip("\n")
    if not after.strip():
        return before.rstrip("\n") + "\n"
    return before.rstrip("\n") + "\n\n\n" + after.lstrip("\n")


def _drop_unused(text: str, names: set[str]) -> str:
    """Whole one-line top-level imports the moved code used that nothing left in the module uses."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return text
    used = _loaded(text)
    lines = source_rows(text)
    drop = {stmt.lineno - 1 for stmt in tree.body if isinstance(stmt, (ast.Import, ast.ImportFrom))
            and stmt.lineno == stmt.end_lineno and _bound_by(stmt) & names and not _bound_by(stmt) & used}
    return "".join(line for i, line in enumerate(lines) if i not in drop)


"""Imports a small model's Python rewrite forgot: a name it uses but never binds that another module of the
request defines (the 1.5B appended `test_clamp` calling clamp without importing it), or a standard-library
module or well-known name (a stub's body written after a head it may not change uses `math` or `Counter`).
The harness adds the import line, like an editor's auto-import, before the Write."""
from __future__ import annotations

import ast
import builtins
import difflib
import re
import sys
from pathlib import Path

from agent.pipeline.checks import top_level_names

IMPORT_LINE = re.compile(r"(from\s+[\w.]+\s+)?import\s+\S")
BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__spec__", "__builtins__"}
STDLIB_MODULES = frozenset(m for m in sys.stdlib_module_names if not m.startswith("_") and m not in {"this", "antigravity"})
STDLIB_NAMES = {  # names code uses bare, each from the one stdlib module that defines it
    **dict.fromkeys(("Counter", "defaultdict", "OrderedDict", "deque", "namedtuple", "ChainMap"), "collections"),
    **dict.fromkeys(("dataclass", "field", "asdict", "astuple"), "dataclasses"),
    **dict.fromkeys(("timedelta", "timezone"), "datetime"),
    **dict.fromkeys(("reduce", "lru_cache", "cache", "partial", "cmp_to_key", "wraps", "total_ordering"), "functools"),
    **dict.fromkeys(("chain", "groupby", "islice", "permutations", "combinations", "product", "accumulate",
                     "zip_longest", "starmap", "pairwise"), "itertools"),
    **dict.fromkeys(("bisect_left", "bisect_right", "insort"), "bisect"),
    **dict.fromkeys(("heappush", "heappop", "heapify", "nlargest", "nsmallest"), "heapq"),
    **dict.fromkeys(("Path", "PurePath", "PurePosixPath"), "pathlib"),
    **dict.fromkeys(("Decimal", "ROUND_HALF_UP"), "decimal"),
    **dict.fromkeys(("Enum", "IntEnum", "auto"), "enum"),
    **dict.fromkeys(("Any", "Optional", "Union", "Iterable", "Iterator", "Callable", "List", "Dict", "Tuple",
                     "Set", "Sequence", "Mapping"), "typing"),
    "Fraction": "fractions", "dedent": "textwrap", "pprint": "pprint", "copy": "copy", "deepcopy": "copy",
    "mean": "statistics", "median": "statistics", "sqrt": "math", "floor": "math", "ceil": "math",
    "isclose": "math", "gcd": "math", "fsum": "math",
}


def unbound_names(source: str) -> set[str]:
    """Names the code loads but binds nowhere (any scope) and that are not builtins; empty when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    used, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
    return used - bound - BUILTINS


def add_missing_imports(content: str, path: Path, root: Path, modules: list[Path]) -> str:
    """`content` (for `path`) with an import line for each unbound name one of `modules` defines at top level,
    then for each one that is a standard-library module or a name of STDLIB_NAMES."""
    missing = unbound_names(content)
    if not missing or path.suffix != ".py":
        return content
    lines = []
    for module in modules:
        if module.resolve() == path.resolve() or module.suffix != ".py" or not module.is_file():
            continue
        try:
            names = top_level_names(module.read_text(encoding="utf-8")) or []
            dotted = module.resolve().relative_to(root.resolve()).with_suffix("").as_posix().replace("/", ".")
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        found = [n for n in dict.fromkeys(names) if n in missing]
        if found:
            lines.append(f"from {dotted} import {', '.join(found)}")
            missing -= set(found)
    plain = [f"import {n}" for n in sorted(missing) if n in STDLIB_MODULES and not (root / f"{n}.py").exists()]
    lines += plain + [f"from {STDLIB_NAMES[n]} import {n}" for n in sorted(missing)
                      if n in STDLIB_NAMES and f"import {n}" not in plain]
    if not lines:
        return content
    return with_imports(content, lines)


def with_imports(content: str, lines: list[str]) -> str:
    """`content` with import `lines` after its last import line (after the module docstring when it has none);
    lines it already has are not repeated."""
    rows = content.splitlines()
    lines = [r for r in lines if r not in rows]
    last = max((i for i, r in enumerate(rows) if IMPORT_LINE.match(r)), default=-1)
    if last < 0 and lines:  # no imports yet: after the module docstring, if any
        try:
            first = ast.parse(content).body[:1]
        except (SyntaxError, ValueError):
            first = []
        docstring = first and isinstance(first[0], ast.Expr) and isinstance(first[0].value, ast.Constant)
        last = first[0].end_lineno - 1 if docstring else -1
    out = rows[:last + 1] + lines + rows[last + 1:]
    return "\n".join(out) + ("\n" if content.endswith("\n") else "")


def broken_imports(content: str, path: Path, root: Path, before: str | None = None) -> list[str]:
    """`from module import name` lines of `content` whose project module defines no such name, each said with the
    closest name it does define ("helpers has no formatname (it has format_name)"), imports of the file from
    itself (once written, the file binds the name by that very line), and names the Python code uses that nothing
    in it binds (a rewrite used GREETING_NAME as a variable and never read the environment): not those `before`
    (the file as it was) used unbound too, nor names only annotations use, nor in a module that writes globals()."""
    try:
        tree = ast.parse(content)
    except (SyntaxError, ValueError):
        return []
    out = []
    if path.suffix == ".py" and "globals()" not in content and not any(
            isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree)):
        unbound = unbound_names(content) - _annotation_only(tree) - (unbound_names(before) if before else set())
        out += [f"{name} is used in {path.name} but never defined or imported" for name in sorted(unbound)]
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        rel = node.module.replace(".", "/") + ".py"
        module = next((c for c in (path.parent / rel, root / rel) if c.is_file()), None)
        if module is not None and module.resolve() == path.resolve():
            out.append(f"{path.name} imports from itself ({node.module})")
            continue
        names = _module_names(module) if module is not None else None
        if names is None:
            continue
        for alias in node.names:
            if alias.name != "*" and alias.name not in names:
                close = difflib.get_close_matches(alias.name, sorted(names), n=1)
                out.append(f"{node.module} has no {alias.name}" + (f" (it has {close[0]})" if close else ""))
    return out


def _annotation_only(tree: ast.AST) -> set[str]:
    """Names loaded only inside annotations (never evaluated under `from __future__ import annotations`)."""
    annotations = [a for n in ast.walk(tree) for a in (
        [n.annotation] if isinstance(n, (ast.arg, ast.AnnAssign)) else
        [n.returns] if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else []) if a is not None]
    inside = {id(x) for a in annotations for x in ast.walk(a)}
    loads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return {n.id for n in loads if id(n) in inside} - {n.id for n in loads if id(n) not in inside}


def _module_names(module: Path) -> set[str] | None:
    """Every name a module binds at top level (imports included); None when that cannot be known."""
    try:
        return module_bindings(ast.parse(module.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None


def module_bindings(tree: ast.Module) -> set[str] | None:
    """Every name a parsed module binds at top level (imports included); None when that cannot be known (a star
    import, a module __getattr__)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                return None
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if node.name == "__getattr__":
                return None  # names made on demand
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names

"""Which of the project's own modules a Python file imports, found by reading its import lines (nothing is
imported or run): a failing test's or a crashing traceback's imports are where the bug often lives, and the tests
of what a script imports are the tests that cover the script."""
from __future__ import annotations

import re
from pathlib import Path

from agent.pipeline.localize import project_files

TEST_FILE = re.compile(r"(^test_.*|.*_test)\.py$")
IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+))", re.MULTILINE)
SOURCE_ROOTS = ("", "src", "lib")  # where a project keeps the packages its tests import


def is_test_file(path: Path) -> bool:
    return bool(TEST_FILE.match(path.name))


def imported_modules(root: Path, files: list[Path]) -> list[Path]:
    """The project's own modules (not tests) that the given files import: a failing test's or a crashing
    traceback's imports are where the bug often lives."""
    out: list[Path] = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for m in IMPORT.finditer(text):
            for candidate in _module_files(root, file, m.group(1) or m.group(2)):
                if candidate.is_file() and not is_test_file(candidate):
                    if candidate.resolve() not in out:
                        out.append(candidate.resolve())
                    break
    return out


def _module_files(root: Path, importer: Path, module: str) -> list[Path]:
    """Where `module`, as `importer` imports it, may be: relative to its package for `from .x`, else beside it or
    under the project root or its source folder (a src/ layout's tests import `pkg.mod` from src/pkg/mod.py)."""
    dots = len(module) - len(module.lstrip("."))
    rel = module.lstrip(".").replace(".", "/")
    if not rel or dots > len(importer.parents):
        return []
    bases = [importer.parents[dots - 1]] if dots else [importer.parent] + [root / s for s in SOURCE_ROOTS]
    return [p for b in bases for p in (b / f"{rel}.py", b / rel / "__init__.py")]


def related_tests(root: Path, targets: list[Path]) -> list[Path]:
    """Test files in the project that import one of `targets` (by module name)."""
    stems = {t.stem for t in targets if t.suffix == ".py" and not is_test_file(t)}
    if not stems:
        return []
    pattern = re.compile(r"^\s*(?:from|import)\s+(?:[\w.]*\.)?(%s)\b" % "|".join(map(re.escape, sorted(stems))),
                         re.MULTILINE)
    out = []
    for f in project_files(root):
        if is_test_file(f):
            try:
                if pattern.search(f.read_text(encoding="utf-8")):
                    out.append(f)
            except (OSError, UnicodeDecodeError):
                continue
    return out


def covered_imports(root: Path, command: str, targets: list[Path]) -> list[Path]:
    """The modules the targets import that a test run's files test, when those files import no target (the tests
    check_commands found through a script's imports): the code those tests hold wrong is in them, not the script."""
    tests = [p for w in command.split() if w.endswith(".py") and is_test_file(p := (root / w).resolve())]
    tested = imported_modules(root, [t for t in tests if t.is_file()])
    if not tested or any(t in tested for t in targets):
        return []
    used = imported_modules(root, [t for t in targets if t.suffix == ".py" and t.is_file()])
    return [p for p in tested if p in used]

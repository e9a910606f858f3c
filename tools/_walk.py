"""Walking a project tree for Glob and Grep's fallback: glob patterns, .gitignore rules, sorted order.

Gitignore support is deliberately rough (no global excludes, no .git/info/exclude) but covers what
projects use: .gitignore files in the walked directories and their ancestors up to the project root,
negation, directory-only and anchored patterns, `**`.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ALWAYS_SKIPPED = {".git"}


def expand_braces(pattern: str) -> list[str]:
    """'*.{ts,tsx}' -> ['*.ts', '*.tsx'] (nested braces expand too)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if not match:
        return [pattern]
    head, tail = pattern[:match.start()], pattern[match.end():]
    return [out for alt in match.group(1).split(",") for out in expand_braces(head + alt + tail)]


def glob_regex(pattern: str) -> str:
    """A regex for one brace-free glob over '/'-separated paths: `*` and `?` stay within a segment, `**` crosses."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := _class_end(pattern, i)) != -1:
            body = pattern[i + 1:end]
            body = "^" + body[1:] if body[:1] in "!^" else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def _class_end(pattern: str, i: int) -> int:
    """Index of the ']' closing the class opened at i, or -1; a ']' first in the class is a member."""
    j = i + 1
    if pattern[j:j + 1] in ("!", "^"):
        j += 1
    if pattern[j:j + 1] == "]":
        j += 1
    return pattern.find("]", j)


def compile_glob(pattern: str) -> re.Pattern:
    """Whole-path matcher for a glob with braces and `**`."""
    return re.compile("(?:" + "|".join(glob_regex(p) for p in expand_braces(pattern)) + r")\Z")


@dataclass
class _Rule:
    regex: re.Pattern
    negate: bool
    dir_only: bool


class IgnoreRules:
    """The .gitignore rules that apply under one directory, each set relative to the directory holding it."""

    def __init__(self, sets: list[tuple[Path, list[_Rule]]] | None = None):
        self.sets = sets or []

    @classmethod
    def above(cls, root: Path, project_root: Path) -> "IgnoreRules":
        """Rules from .gitignore files in root's ancestors up to project_root (none when root is outside it)."""
        rules = cls()
        for d in reversed(root.parents):
            if d.is_relative_to(project_root):
                rules = rules.entering(d)
        return rules

    def entering(self, directory: Path) -> "IgnoreRules":
        """These rules plus the directory's own .gitignore, if any."""
        try:
            text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return self
        parsed = [r for line in text.splitlines() if (r := _parse(line))]
        return IgnoreRules(self.sets + [(directory, parsed)]) if parsed else self

    def ignored(self, path: Path, is_dir: bool) -> bool:
        verdict = False  # the last matching rule wins, across files from outer to inner
        for base, rules in self.sets:
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            for rule in rules:
                if (is_dir or not rule.dir_only) and rule.regex.match(rel):
                    verdict = not rule.negate
        return verdict


def _parse(line: str) -> _Rule | None:
    line = line.rstrip()
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    line = line[1:] if negate else line
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line  # a slash anywhere but the end anchors the pattern to the .gitignore's directory
    line = line.lstrip("/")
    alternatives = [glob_regex(p) for p in expand_braces(line)]
    regex = "(?:" + "|".join(alternatives) + ")"
    return _Rule(re.compile(regex + r"\Z" if anchored else "(?:.*/)?" + regex + r"\Z"), negate, dir_only)


class GlobFilter:
    """ripgrep's --glob semantics: gitignore-style globs relative to the search root; `!` excludes.

    A file matching an include glob is searched even if .gitignore names it; with include globs given,
    files matching none are skipped (directories are still entered).
    """

    def __init__(self, globs: list[str]):
        self.rules = [r for g in globs if (r := _parse(g))]
        self.has_includes = any(not r.negate for r in self.rules)

    def verdict(self, rel: str, is_dir: bool) -> bool | None:
        """True: include (over .gitignore); False: skip; None: let .gitignore decide."""
        for rule in reversed(self.rules):  # the last matching glob wins
            if (is_dir or not rule.dir_only) and rule.regex.match(rel):
                return not rule.negate
        return False if self.has_includes and not is_dir else None


def walk_files(root: Path, project_root: Path, globs: GlobFilter | None = None,
               max_depth: int | None = None) -> Iterator[Path]:
    """Files under root in sorted depth-first order, skipping .git, ignored paths and symlinks (as ripgrep does)."""

    def visit(directory: Path, rules: IgnoreRules, depth: int) -> Iterator[Path]:
        rules = rules.entering(directory)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink() or entry.name in ALWAYS_SKIPPED:
                continue
            is_dir = entry.is_dir()
            verdict = globs.verdict(path.relative_to(root).as_posix(), is_dir) if globs else None
            if verdict is False or verdict is None and rules.ignored(path, is_dir):
                continue
            if is_dir:
                if max_depth is None or depth < max_depth:
                    yield from visit(path, rules, depth + 1)
            elif entry.is_file():
                yield path

    yield from visit(root, IgnoreRules.above(root, project_root), 1)

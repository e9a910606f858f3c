"""Walking a project tree for Glob and Grep's fallback: glob patterns, ignore rules, sorted order.

Ignore rules have git's semantics through `pathspec`: .gitignore files in the walked directories and their
ancestors up to the project root, .git/info/exclude and the global core.excludesFile.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Iterator

import pathspec

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


class IgnoreRules:
    """The ignore rules that apply under one directory: (base directory, spec) pairs, lowest precedence first.

    Git's order: core.excludesFile, then .git/info/exclude, then .gitignore files from outer to inner; the last
    matching pattern wins. Each spec matches paths relative to its base.
    """

    def __init__(self, sets: list[tuple[Path, pathspec.GitIgnoreSpec]] | None = None):
        self.sets = sets or []

    @classmethod
    def above(cls, root: Path, project_root: Path) -> "IgnoreRules":
        """Global and repository excludes, then .gitignore files in root's ancestors up to project_root."""
        rules = cls(_repository_excludes(root, project_root))
        for d in reversed(root.parents):
            if d.is_relative_to(project_root):
                rules = rules.entering(d)
        return rules

    def entering(self, directory: Path) -> "IgnoreRules":
        """These rules plus the directory's own .gitignore, if any."""
        spec = _read_spec(directory / ".gitignore")
        return IgnoreRules(self.sets + [(directory, spec)]) if spec else self

    def ignored(self, path: Path, is_dir: bool) -> bool:
        verdict = False
        for base, spec in self.sets:
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            include = spec.check_file(rel + "/" if is_dir else rel).include  # a trailing / marks a directory
            if include is not None:
                verdict = include
        return verdict


def _read_spec(file: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    spec = pathspec.GitIgnoreSpec.from_lines(text.splitlines())
    return spec if len(spec) else None


def _repository_excludes(root: Path, project_root: Path) -> list[tuple[Path, pathspec.GitIgnoreSpec]]:
    """core.excludesFile and .git/info/exclude, relative to the repository's top (the project when none).

    Read whether or not the tree is a repository, as ripgrep does with --no-require-git.
    """
    start = root if root.is_dir() else root.parent
    top, info_exclude, excludes_file = project_root, None, None
    found = _git(start, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-path", "info/exclude")
    if found and len(found) == 2:
        top, info_exclude = Path(found[0]), Path(found[1])
    configured = _git(start, "config", "--path", "--get", "core.excludesFile")
    if configured:
        excludes_file = Path(configured[0])
    else:  # git's default location; git itself reads these variables
        config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        excludes_file = Path(config_home) / "git" / "ignore"
    return [(top, spec) for f in (excludes_file, info_exclude) if f and (spec := _read_spec(f))]


def _git(cwd: Path, *args: str) -> list[str] | None:
    """git's output lines, or None when git is missing or the command fails (not a repository, key unset)."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.splitlines() if proc.returncode == 0 else None


class GlobFilter:
    """ripgrep's --glob semantics: gitignore-style globs relative to the search root; `!` excludes.

    A file matching an include glob is searched even if .gitignore names it; with include globs given,
    files matching none are skipped (directories are still entered). The last matching glob wins.
    """

    def __init__(self, globs: list[str]):
        lines = [g for glob in globs for g in _expand_negated(glob)]
        self.spec = pathspec.GitIgnoreSpec.from_lines(lines)
        self.has_includes = any(not g.startswith("!") for g in lines)

    def verdict(self, rel: str, is_dir: bool) -> bool | None:
        """True: include (over .gitignore); False: skip; None: let .gitignore decide."""
        include = self.spec.check_file(rel + "/" if is_dir else rel).include
        if include is not None:
            return include
        return False if self.has_includes and not is_dir else None


def _expand_negated(glob: str) -> list[str]:
    """Braces expanded, the `!` kept on each alternative (gitignore patterns have no braces)."""
    negate = glob.startswith("!")
    return [("!" if negate else "") + g for g in expand_braces(glob[1:] if negate else glob)]


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

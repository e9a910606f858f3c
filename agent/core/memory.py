"""Memory files: AGENTS.md / CLAUDE.md / CLAUDE.local.md from the user's home and the repo, with @imports.

Order (general to specific, so nearer instructions come later and win):
  <agent home>/AGENTS.md, <claude home>/CLAUDE.md, then for each directory from the repository
  root down to the cwd: AGENTS.md, CLAUDE.md, CLAUDE.local.md.
A line that is only `@path` is replaced by that file (relative to the importing file, `~` allowed),
at most MAX_IMPORT_DEPTH levels deep; cycles are ignored, a missing file leaves a note.
An import that resolves (symlinks followed) outside the project and the user's memory directories
(`@~/.ssh/id_rsa`, `@../other/secret`) is read only when `approve(path)` says so; without an approver
it is refused, and the note left in its place says why.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

MAX_IMPORT_DEPTH = 4
DIR_FILES = ("AGENTS.md", "CLAUDE.md", "CLAUDE.local.md")


@dataclass
class MemoryFile:
    path: Path
    text: str  # imports already expanded


def memory_paths(cwd: Path, repo_root: Path, agent_home: Path, claude_home: Path) -> list[Path]:
    """Candidate memory files in load order (existing ones only, each once)."""
    cwd, repo_root = Path(cwd).resolve(), Path(repo_root).resolve()
    dirs = [cwd]
    if cwd != repo_root and repo_root in cwd.parents:
        dirs = [cwd] + [p for p in cwd.parents if p == repo_root or repo_root in p.parents]
    dirs.reverse()  # root first, cwd last
    candidates = [Path(agent_home) / "AGENTS.md", Path(claude_home) / "CLAUDE.md"]
    candidates += [d / name for d in dirs for name in DIR_FILES]
    out: list[Path] = []
    for p in candidates:
        if p.is_file() and p.resolve() not in {q.resolve() for q in out}:
            out.append(p)
    return out


def load_memory(cwd: Path, repo_root: Path, agent_home: Path, claude_home: Path,
                approve: Callable[[Path], bool] | None = None) -> list[MemoryFile]:
    """The memory files with their imports; imports from outside cwd, the repository and the two homes need `approve`."""
    roots = tuple(Path(d).resolve() for d in (cwd, repo_root, agent_home, claude_home))
    return [MemoryFile(p, expand_imports(p, roots=roots, approve=approve))
            for p in memory_paths(cwd, repo_root, agent_home, claude_home)]


def expand_imports(path: Path, depth: int = 0, seen: frozenset[Path] = frozenset(), *,
                   roots: tuple[Path, ...] = (), approve: Callable[[Path], bool] | None = None) -> str:
    """The text of `path` with `@file` lines replaced by those files' (expanded) text; files outside `roots`
    only when `approve` allows them."""
    path = Path(path).resolve()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return f"(could not read {path}: {e.strerror})"
    seen = seen | {path}
    out: list[str] = []
    in_fence = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence  # imports inside code blocks are examples, not imports
        target = stripped[1:] if stripped.startswith("@") and not in_fence else ""
        if not target or " " in target:
            out.append(line)
            continue
        ref = Path(target).expanduser()
        ref = (ref if ref.is_absolute() else path.parent / ref).resolve()
        if ref in seen:
            continue  # a cycle: the file is already being included above
        if depth >= MAX_IMPORT_DEPTH:
            out.append(f"(import {target} skipped: imports nest deeper than {MAX_IMPORT_DEPTH})")
        elif not ref.is_file():
            out.append(f"(import {target} not found)")
        elif not any(ref == root or root in ref.parents for root in roots) and not (approve and approve(ref)):
            out.append(f"(import {target} skipped: {ref} is outside the project and the memory directories, "
                       "and reading it was not approved)")
        else:
            out.append(expand_imports(ref, depth + 1, seen, roots=roots, approve=approve).rstrip("\n"))
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def render_memory(files: list[MemoryFile]) -> str:
    """One block for the context, each file introduced by its path."""
    blocks = [f"Contents of {f.path} (instructions from the user or project; follow them):\n\n{f.text.strip()}"
              for f in files if f.text.strip()]
    return "\n\n".join(blocks)

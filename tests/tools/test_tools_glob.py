"""Glob: ** patterns, newest first, .git and .gitignore'd paths skipped, capped with a note."""
from __future__ import annotations

import os
import subprocess

import pytest

from tools.base import ToolContext, ToolResult
from tools.glob import GlobTool


@pytest.fixture
def project(tmp_path):
    names = ["main.py", "README.md", "src/app.py", "src/util.ts", "src/ui/view.tsx", "src/ui/test_view.py",
             "tests/test_app.py", "build/gen.py", ".git/hooks/pre.py", ".gitignore"]
    for age, name in enumerate(names):  # later in the list = older
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("build/\n" if name == ".gitignore" else "x\n")
        os.utime(path, ns=(1_700_000_000_000_000_000 - age * 10**9,) * 2)
    return tmp_path


def glob(project, tool=None, **args) -> ToolResult:
    return (tool or GlobTool()).run(args, ToolContext(cwd=project))


def test_recursive_pattern_newest_first(project):
    assert glob(project, pattern="**/*.py") == ToolResult(
        "main.py\nsrc/app.py\nsrc/ui/test_view.py\ntests/test_app.py", data={"num_files": 4})


def test_single_star_stays_in_one_directory_with_hint_when_empty(project):
    assert glob(project, pattern="*.py").content == "main.py"
    assert glob(project, pattern="*.tsx").content == (
        "No files match '*.tsx' (.git and .gitignore'd paths are not searched). "
        'To search subdirectories too, use "**/*.tsx".')


def test_literal_prefix_braces_and_path(project):
    assert glob(project, pattern="src/**/*.{ts,tsx}").content == "src/util.ts\nsrc/ui/view.tsx"
    assert glob(project, pattern="**/test_*.py", path="src").content == "src/ui/test_view.py"
    assert glob(project, pattern=str(project / "src" / "*.py")).content == "src/app.py"
    assert glob(project, pattern="../src/ui/*", path="tests").content == "src/ui/view.tsx\nsrc/ui/test_view.py"


def test_cap_with_note(project):
    assert glob(project, GlobTool(max_results=2), pattern="**/*").content == (
        "main.py\nREADME.md\n[Showing the 2 most recently modified of 8 files; narrow the pattern or path.]")


def test_errors(project):
    assert glob(project, pattern="*", path="srcc") == ToolResult(
        "Directory does not exist: srcc. Did you mean: src?", is_error=True)
    assert glob(project, pattern="*", path="main.py") == ToolResult("main.py is a file, not a directory.", is_error=True)
    assert glob(project, pattern=" ").content == 'pattern is empty; e.g. "**/*.py".'


def test_global_excludes_and_info_exclude(tmp_path, monkeypatch):
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".config" / "git").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    (home / ".config" / "git" / "ignore").write_text("*.bak\n")  # git's default global excludes file
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".git" / "info" / "exclude").write_text("/scratch\n!keep.bak\n")
    for name in ["a.py", "a.bak", "keep.bak", "scratch/s.py", "sub/scratch/t.py"]:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("x\n")
    assert sorted(glob(project, pattern="**/*").content.splitlines()) == ["a.py", "keep.bak", "sub/scratch/t.py"]

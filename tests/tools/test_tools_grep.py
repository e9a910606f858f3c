"""Grep: the Python engine with whole expected outputs; ripgrep (always installed, a dependency) compared against it."""
from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tools.base import ToolContext, ToolResult
from tools.grep import GrepTool, ripgrep_binary


@pytest.fixture
def project(tmp_path):
    files = {
        "a.py": "import os\ndef foo():\n    return os.sep\n",
        "src/b.py": "def foo_bar():\n    pass\n# FOO\nx = 1\ny = 2\nfoo = 3\n",
        "src/c.ts": "export const foo = 1;\n",
        "src/d.tsx": "const Foo = () => null;\n",
        "src/gen_x.py": "foo generated\n",  # ignored by src/.gitignore
        "src/.gitignore": "gen_*.py\n",
        ".hidden/h.py": "foo hidden\n",
        ".git/config": "foo in git\n",
        "build/out.py": "foo built\n",
        "app.log": "foo logged\n",
        "src/trace.log": "foo traced\n",  # ignored by the root .gitignore, also when searching src
        ".gitignore": "build/\n*.log\n",
        "notes.md": "first foo\r\nsecond\r\n",
        "deep/er/z.py": "zzz foo\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    (tmp_path / "bin.dat").write_bytes(b"foo\x00\x01\x02")
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 au lait\n")
    (tmp_path / "link.py").symlink_to(tmp_path / "a.py")
    return tmp_path


def grep(project, engine="python", **args) -> ToolResult:
    return GrepTool(use_ripgrep=engine == "rg").run(args, ToolContext(cwd=project))


def test_files_with_matches_skips_git_ignored_binary_and_symlinks(project):
    result = grep(project, pattern="foo")
    assert result == ToolResult(".hidden/h.py\na.py\ndeep/er/z.py\nnotes.md\nsrc/b.py\nsrc/c.ts",
                                data={"mode": "files_with_matches", "num_files": 6, "engine": "python"})


def test_content_with_line_numbers_and_context(project):
    assert grep(project, pattern="foo", path="src", output_mode="content").content == \
        "src/b.py:1:def foo_bar():\nsrc/b.py:6:foo = 3\nsrc/c.ts:1:export const foo = 1;"
    assert grep(project, pattern="^foo|pass", path="src/b.py", output_mode="content", **{"-B": 1, "-A": 1}).content == \
        "src/b.py-1-def foo_bar():\nsrc/b.py:2:    pass\nsrc/b.py-3-# FOO\n--\nsrc/b.py-5-y = 2\nsrc/b.py:6:foo = 3"
    assert grep(project, pattern="first", output_mode="content", **{"-n": False, "-C": 1}).content == \
        "notes.md:first foo\nnotes.md-second"  # CRLF stripped


def test_count_case_insensitive_glob_and_type(project):
    assert grep(project, pattern="foo", output_mode="count", **{"-i": True}, path="src").content == \
        "src/b.py:3\nsrc/c.ts:1\nsrc/d.tsx:1\n[5 matching lines in 3 files]"
    assert grep(project, pattern="foo", glob="*.{ts,tsx}", **{"-i": True}).content == "src/c.ts\nsrc/d.tsx"
    assert grep(project, pattern="foo", glob="src/*.py").content == "src/b.py\nsrc/gen_x.py"
    assert grep(project, pattern="foo", type="py").content == ".hidden/h.py\na.py\ndeep/er/z.py\nsrc/b.py"
    assert grep(project, pattern="foo", type="python").content == ".hidden/h.py\na.py\ndeep/er/z.py\nsrc/b.py"
    # An include glob names files .gitignore would hide, as ripgrep's --glob does.
    assert grep(project, pattern="foo", glob="*.log").content == "app.log\nsrc/trace.log"


def test_head_limit_note(project):
    assert grep(project, pattern="foo", head_limit=2).content == (
        ".hidden/h.py\na.py\n[Showing 2 of 6 files; narrow the search with path, glob or type, or raise head_limit.]")


def test_explicit_file_is_searched_even_if_ignored_or_binary(project):
    assert grep(project, pattern="foo", path="build/out.py", output_mode="content").content == "build/out.py:1:foo built"
    assert grep(project, pattern="foo", path="bin.dat").content == "bin.dat"


def test_no_match_bad_regex_bad_type_missing_path(project):
    assert grep(project, pattern="nothing_here_at_all").content == "No matches found."
    assert grep(project, pattern="(unclosed") == ToolResult(
        "Invalid regular expression: missing ), unterminated subpattern at position 0.", is_error=True)
    assert grep(project, pattern="x", type="cobol").content.startswith("Unknown type 'cobol'; known types: py, js, ts,")
    assert grep(project, pattern="x", path="srcc").content == "Path does not exist: srcc. Did you mean: src?"


def test_non_utf8_lines_are_shown_with_replacement_characters(project):
    assert grep(project, pattern="caf", output_mode="content").content == "latin1.txt:1:caf\ufffd au lait"


def test_long_lines_are_cut(project):
    (project / "wide.txt").write_text("foo" + "x" * 600 + "\n")
    assert grep(project, pattern="foo", path="wide.txt", output_mode="content").content == \
        "wide.txt:1:foo" + "x" * 497 + "... [603 characters]"


CASES = [
    {"pattern": "foo"},
    {"pattern": "foo", "-i": True, "output_mode": "count"},
    {"pattern": "foo", "output_mode": "content", "-C": 2},
    {"pattern": "^(def|export)", "output_mode": "content", "-n": False},
    {"pattern": "foo", "glob": "*.{ts,tsx}", "-i": True},
    {"pattern": "foo", "glob": "src/*.py"},
    {"pattern": "foo", "glob": "*.log"},
    {"pattern": "foo", "glob": "!*.py"},
    {"pattern": "foo", "type": "py", "output_mode": "content"},
    {"pattern": "foo", "path": "src"},
    {"pattern": "caf", "output_mode": "content"},  # not UTF-8: shown with a replacement character
    {"pattern": "foo", "path": "bin.dat", "output_mode": "count"},
    {"pattern": "foo", "path": "build/out.py"},
    {"pattern": "o(?=s)", "output_mode": "content"},  # look-ahead: ripgrep refuses, Python takes over
    {"pattern": "first$", "output_mode": "content"},  # `$` before a CR does not match in either engine
    {"pattern": r"\bfoo\b", "head_limit": 3},
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: str(a))
def test_ripgrep_and_python_engines_agree(project, args):
    rg, py = grep(project, "rg", **args), grep(project, "python", **args)
    assert (rg.content, rg.is_error) == (py.content, py.is_error)
    assert rg.data.get("engine") == ("python" if "?=" in args["pattern"] else "rg")


def test_ripgrep_comes_from_the_package_not_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    rg = ripgrep_binary()
    assert rg is not None and Path(rg).parent in (Path(sysconfig.get_path("scripts")), Path(sys.executable).parent)


@pytest.fixture
def repo_with_excludes(tmp_path, monkeypatch):
    """A git repository whose global excludes file and .git/info/exclude each hide one file."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    (home / "global-ignore").write_text("*.swp\n")
    (home / ".gitconfig").write_text(f"[core]\n\texcludesFile = {home / 'global-ignore'}\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / ".git" / "info").mkdir(exist_ok=True)
    (project / ".git" / "info" / "exclude").write_text("local-only/\n")
    for name in ["keep.py", "edit.swp", "local-only/x.py", "sub/deep.swp", "sub/ok.py"]:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text("needle\n")
    return project


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_global_excludes_and_info_exclude_hide_files(repo_with_excludes, engine):
    assert grep(repo_with_excludes, engine, pattern="needle").content == "keep.py\nsub/ok.py"
    assert grep(repo_with_excludes, engine, pattern="needle", path="sub").content == "sub/ok.py"

"""LS: an indented tree, directories first, default skips, ignore globs, breadth-first cap."""
from __future__ import annotations

from tools.base import ToolContext, ToolResult
from tools.ls import LSTool


def make(root, names):
    for name in names:
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x\n")


def test_tree_dirs_first_with_default_skips_and_symlinks(tmp_path):
    make(tmp_path, ["README.md", ".env", "src/app.py", "src/lib/util.py", "src/__pycache__/app.pyc", "empty/",
                    ".git/HEAD", "node_modules/x/index.js", "app.log"])
    (tmp_path / "latest").symlink_to("src")
    result = LSTool().run({}, ToolContext(cwd=tmp_path))
    assert result == ToolResult(
        f"{tmp_path}/\n"
        "  empty/\n"
        "  latest/ -> src\n"
        "  src/\n"
        "    lib/\n"
        "      util.py\n"
        "    app.py\n"
        "  .env\n"
        "  README.md\n"
        "  app.log",
        data={"num_entries": 9, "truncated": False})


def test_ignore_globs_and_relative_path(tmp_path):
    make(tmp_path, ["src/app.py", "src/app.log", "src/build/out.o", "src/keep.txt"])
    result = LSTool().run({"path": "src", "ignore": ["*.log", "build"]}, ToolContext(cwd=tmp_path))
    assert result.content == f"{tmp_path}/src/\n  app.py\n  keep.txt"


def test_cap_fills_breadth_first_and_marks_what_is_not_shown(tmp_path):
    make(tmp_path, ["a/1", "a/2", "b/big1", "b/big2", "b/big3", "top.txt"])
    result = LSTool(max_entries=5).run({}, ToolContext(cwd=tmp_path))
    assert result.content == (
        f"{tmp_path}/\n"
        "  a/\n"
        "    1\n"
        "    2\n"
        "  b/ (3 entries not shown)\n"
        "  top.txt\n"
        "[Listing capped at 5 entries; call LS on a directory marked 'not shown' to see it, or use Glob.]")
    assert result.data == {"num_entries": 5, "truncated": True}
    root_capped = LSTool(max_entries=2).run({}, ToolContext(cwd=tmp_path)).content
    assert root_capped == (f"{tmp_path}/\n  a/ (2 entries not shown)\n  b/ (3 entries not shown)\n"
                           "  ... (1 more entries not shown)\n"
                           "[Listing capped at 2 entries; call LS on a directory marked 'not shown' to see it, or use Glob.]")


def test_errors(tmp_path):
    make(tmp_path, ["file.txt", "docs/"])
    ctx = ToolContext(cwd=tmp_path)
    assert LSTool().run({"path": "file.txt"}, ctx) == ToolResult(
        "file.txt is a file, not a directory; use Read to see it.", is_error=True)
    assert LSTool().run({"path": "doc"}, ctx) == ToolResult(
        "Directory does not exist: doc. Did you mean: docs?", is_error=True)

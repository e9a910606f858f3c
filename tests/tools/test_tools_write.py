"""Write: create, overwrite only what was read and is unchanged, atomic, mode and line endings kept."""
from __future__ import annotations

import os

from tools.base import ToolContext, ToolResult
from tools.read import ReadTool
from tools.write import WriteTool


def write(ctx, **args) -> ToolResult:
    return WriteTool().run(args, ctx)


def test_creates_file_and_parent_dirs_with_umask_mode(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    result = write(ctx, file_path="a/b/new.py", content="x = 1\ny = 2\n")
    f = tmp_path / "a/b/new.py"
    assert result == ToolResult("Created a/b/new.py (2 lines).", data={
        "file_path": str(f), "created": True,
        "diff": "--- a/a/b/new.py\n+++ b/a/b/new.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n"})
    assert f.read_text() == "x = 1\ny = 2\n"
    umask = os.umask(0)
    os.umask(umask)
    assert f.stat().st_mode & 0o777 == 0o666 & ~umask
    assert str(f) in ctx.read_files
    assert sorted(p.name for p in f.parent.iterdir()) == ["new.py"]  # no temp file left behind


def test_overwrite_requires_a_read_first(tmp_path):
    f = tmp_path / "old.txt"
    f.write_text("old\n")
    ctx = ToolContext(cwd=tmp_path)
    assert write(ctx, file_path="old.txt", content="new\n") == \
        ToolResult("You must Read old.txt before changing it.", is_error=True)
    assert f.read_text() == "old\n"
    ReadTool().run({"file_path": "old.txt"}, ctx)
    result = write(ctx, file_path="old.txt", content="new\n")
    assert (result.content, result.data["created"]) == ("Overwrote old.txt (1 line).", False)
    assert result.data["diff"] == "--- a/old.txt\n+++ b/old.txt\n@@ -1 +1 @@\n-old\n+new\n"
    assert f.read_text() == "new\n"
    # What the agent wrote itself counts as known: a second Write needs no new Read.
    assert not write(ctx, file_path="old.txt", content="newer").is_error
    assert f.read_text() == "newer"


def test_with_a_read_window_the_refusal_shows_the_file_and_counts_as_the_read(tmp_path):
    f = tmp_path / "old.txt"
    f.write_text("".join(f"v{i}\n" for i in range(1, 301)))
    ctx = ToolContext(cwd=tmp_path, read_window=200)  # a small model
    refused = write(ctx, file_path="old.txt", content="new\n")
    assert refused.is_error and refused.data["retry"] and f.read_text().startswith("v1\nv2\n")
    head, *rows = refused.content.split("\n")
    assert head == ("old.txt was not changed: you had not read it. Its content is below and now counts as your "
                    "Read; if your change still fits it, make the call again.")
    assert rows[0] == "     1\tv1" and rows[199] == "   200\tv200" and rows[200].startswith("[Showing lines 1-200 of 300.")
    assert write(ctx, file_path="old.txt", content="new\n").content == "Overwrote old.txt (1 line)."  # the same call
    assert f.read_text() == "new\n"
    # Binary files and stale reads keep the plain refusal: nothing to show, or a Read is really needed.
    (tmp_path / "b.bin").write_bytes(b"\x00\x01")
    assert write(ctx, file_path="b.bin", content="x") == ToolResult("You must Read b.bin before changing it.",
                                                                      is_error=True)
    f.write_text("changed\n")
    assert write(ctx, file_path="old.txt", content="x").content == "old.txt changed on disk since you read it; Read it again."


def test_overwrite_refused_when_file_changed_since_read(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("v1\n")
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "f.txt"}, ctx)
    f.write_text("v2 by someone else\n")
    assert write(ctx, file_path="f.txt", content="mine\n") == \
        ToolResult("f.txt changed on disk since you read it; Read it again.", is_error=True)
    assert f.read_text() == "v2 by someone else\n"


def test_overwrite_keeps_mode_and_crlf(tmp_path):
    f = tmp_path / "run.sh"
    f.write_bytes(b"echo 1\r\necho 2\r\n")
    f.chmod(0o755)
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "run.sh"}, ctx)
    write(ctx, file_path="run.sh", content="echo 3\n")
    assert f.read_bytes() == b"echo 3\r\n"
    assert f.stat().st_mode & 0o777 == 0o755


def test_writes_through_a_symlink_to_its_target(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("a\n")
    (tmp_path / "link.txt").symlink_to(target)
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "link.txt"}, ctx)
    assert not write(ctx, file_path="link.txt", content="b\n").is_error
    assert (tmp_path / "link.txt").is_symlink() and target.read_text() == "b\n"


def test_directory_is_an_error(tmp_path):
    (tmp_path / "d").mkdir()
    assert write(ToolContext(cwd=tmp_path), file_path="d", content="x") == \
        ToolResult("d is a directory; give a file path.", is_error=True)

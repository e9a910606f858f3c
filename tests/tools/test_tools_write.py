"""Write: create, overwrite only what was read and is unchanged, atomic, mode, owner and line endings kept;
no silent loss of most of a file."""
from __future__ import annotations

import os

import pytest

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
    ctx = ToolContext(cwd=tmp_path, read_window=200, allow_shrink=True)  # a small model, asked to replace the file
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


CONFIG = '{\n  "name": "svc",\n  "port": 8080,\n  "debug": true,\n  "workers": 4\n}\n'


def test_a_write_that_drops_most_of_a_file_is_refused(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(CONFIG)
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "config.json"}, ctx)
    # The small model's Write: one line in place of six, whatever it parses as ("debug" changed, the rest lost).
    assert write(ctx, file_path="config.json", content='{"debug": false}\n') == ToolResult(
        "config.json was not changed: Write replaces the whole file, and your content keeps 1 of its 6 lines. "
        'These would be lost:\n     1\t{\n     2\t  "name": "svc",\n     3\t  "port": 8080,\n'
        '     5\t  "workers": 4\n     6\t}\nTo change part of the file, use Edit with old_string copied from it.',
        is_error=True)
    assert f.read_text() == CONFIG
    # Keeping half the lines (indentation aside) is a rewrite, not a loss.
    kept = '{\n"name": "svc",\n"port": 9090,\n"debug": false\n}\n'
    assert write(ctx, file_path="config.json", content=kept).content == "Overwrote config.json (5 lines)."
    assert f.read_text() == kept


def test_shrink_guard_lists_at_most_ten_lost_lines_and_spares_small_files(tmp_path):
    f = tmp_path / "log.txt"
    f.write_text("".join(f"entry {i}\n" for i in range(1, 15)))
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "log.txt"}, ctx)
    refused = write(ctx, file_path="log.txt", content="entry 1\nentry 2\n").content
    assert refused.split("\n")[0] == ("log.txt was not changed: Write replaces the whole file, and your content keeps "
                                      "2 of its 14 lines. These would be lost:")
    assert refused.split("\n")[1:] == [f"{n:>6}\tentry {n}" for n in range(3, 13)] + [
        "[... and 2 more]", "To change part of the file, use Edit with old_string copied from it."]
    small = tmp_path / "small.txt"
    small.write_text("a\nb\nc\n\n\n\nd\n")  # four non-blank lines
    ReadTool().run({"file_path": "small.txt"}, ctx)
    assert write(ctx, file_path="small.txt", content="z\n").content == "Overwrote small.txt (1 line)."


def test_lines_changed_in_place_count_as_kept_and_a_rewrite_does_not(tmp_path):
    # A parameter renamed on 5 of a file's 8 lines changes them; it drops none of them.
    f = tmp_path / "api.py"
    old = ('"""Pages."""\n\nRECORDS = list(range(23))\n\n\ndef paginate(records, lim=10, start=0):\n'
           '    """Yield pages of at most lim records."""\n    if lim <= 0:\n        raise ValueError("lim must be positive")\n'
           '    for i in range(start, len(records), lim):\n        yield records[i:i + lim]\n')
    f.write_text(old)
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "api.py"}, ctx)
    renamed = old.replace("lim", "page_size")
    assert write(ctx, file_path="api.py", content=renamed).content == "Overwrote api.py (11 lines)."
    # The same number of lines saying something else loses the function: refused, each new line paired once.
    other = ('"""Pages."""\n\nRECORDS = list(range(23))\n\n\ndef total(values):\n    return sum(values)\n'
             '\n\ndef mean(values):\n    return total(values) / len(values)\n')
    refused = write(ctx, file_path="api.py", content=other).content
    assert refused.startswith("api.py was not changed: Write replaces the whole file, and your content keeps 2 of its "
                              "8 lines. These would be lost:\n     6\tdef paginate(records, page_size=10, start=0):"), refused
    assert f.read_text() == renamed


def test_allow_shrink_lets_the_user_asked_rewrite_through(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(CONFIG)
    ctx = ToolContext(cwd=tmp_path, allow_shrink=True)
    ReadTool().run({"file_path": "config.json"}, ctx)
    assert write(ctx, file_path="config.json", content="{}\n").content == "Overwrote config.json (1 line)."
    assert f.read_text() == "{}\n"


def test_overwrite_keeps_the_owner(tmp_path):
    if os.getuid() != 0:
        pytest.skip("changing a file's owner needs root")
    f = tmp_path / "shared.txt"
    f.write_text("a\n")
    os.chown(f, 1234, 5678)
    f.chmod(0o640)
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "shared.txt"}, ctx)
    assert not write(ctx, file_path="shared.txt", content="b\n").is_error
    st = f.stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777, f.read_text()) == (1234, 5678, 0o640, "b\n")

"""Edit and MultiEdit: replacement after a Read (exact, else tolerant and unique), actionable errors, all-or-nothing,
CRLF and mode kept."""
from __future__ import annotations

import os

from tools.base import ToolContext, ToolResult
from tools.edit import EditTool
from tools.multiedit import MultiEditTool
from tools.read import ReadTool

SOURCE = "def add(a, b):\n    return a+b\n\n\ndef sub(a, b):\n    return a-b\n"


def setup(tmp_path, text=SOURCE, name="app.py"):
    f = tmp_path / name
    f.write_text(text)
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": name}, ctx)
    return f, ctx


def edit(ctx, **args) -> ToolResult:
    return EditTool().run(args, ctx)


def test_replaces_once_and_shows_changed_lines(tmp_path):
    f, ctx = setup(tmp_path)
    result = edit(ctx, file_path="app.py", old_string="a+b", new_string="a + b")
    assert result == ToolResult(
        "Edited app.py (1 replacement). Changed lines now read:\n"
        "     1\tdef add(a, b):\n     2\t    return a + b\n     3\t\n     4\t",
        data={"file_path": str(f), "replacements": 1, "match": "exact",
              "diff": "--- a/app.py\n+++ b/app.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a+b\n+    return a + b\n"
                      " \n \n def sub(a, b):\n"})
    assert f.read_text() == SOURCE.replace("a+b", "a + b")
    # The agent's own edit refreshes its stamp: a second edit needs no new Read.
    assert not edit(ctx, file_path="app.py", old_string="a-b", new_string="a - b").is_error


def test_requires_read_first(tmp_path):
    (tmp_path / "app.py").write_text(SOURCE)
    assert edit(ToolContext(cwd=tmp_path), file_path="app.py", old_string="a+b", new_string="a + b") == \
        ToolResult("You must Read app.py before changing it.", is_error=True)


def test_with_a_read_window_edit_and_multiedit_refusals_count_as_the_read(tmp_path):
    f = tmp_path / "app.py"
    f.write_text(SOURCE)
    for tool, args in ((EditTool(), {"old_string": "a+b", "new_string": "a + b"}),
                       (MultiEditTool(), {"edits": [{"old_string": "a-b", "new_string": "a - b"}]})):
        ctx = ToolContext(cwd=tmp_path, read_window=200)
        refused = tool.run({"file_path": "app.py", **args}, ctx)
        assert refused.is_error and refused.data["retry"] and "     2\t    return a" in refused.content
        assert not tool.run({"file_path": "app.py", **args}, ctx).is_error  # the identical call now goes through
    assert f.read_text() == SOURCE.replace("a+b", "a + b").replace("a-b", "a - b")


def test_stale_after_external_modification(tmp_path):
    f, ctx = setup(tmp_path)
    f.write_text(SOURCE + "# appended by a formatter\n")
    stale = ToolResult("app.py changed on disk since you read it; Read it again.", is_error=True)
    assert edit(ctx, file_path="app.py", old_string="a+b", new_string="a + b") == stale
    # Same size, new mtime (a `touch` or a same-length rewrite) is stale too.
    ReadTool().run({"file_path": "app.py"}, ctx)
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert edit(ctx, file_path="app.py", old_string="a+b", new_string="a + b") == stale
    assert f.read_text() == SOURCE + "# appended by a formatter\n"


def test_not_found_names_closest_match_with_line_numbers(tmp_path):
    _, ctx = setup(tmp_path)
    result = edit(ctx, file_path="app.py", old_string="def sub(a, b):\n    return a - b", new_string="x")
    assert result == ToolResult(
        "app.py: old_string was not found in the file. The closest text is at lines 5-6 (97% similar):\n"
        "     5\tdef sub(a, b):\n     6\t    return a-b\n"
        "Copy the text exactly as the file has it (without Read's line-number prefix).", is_error=True)


def test_read_gutters_copied_into_the_strings_are_removed(tmp_path):
    f, ctx = setup(tmp_path)
    result = edit(ctx, file_path="app.py", old_string="     2\t    return a+b", new_string="     2\t    return a + b")
    assert result == ToolResult(
        "Edited app.py (1 replacement; matched without Read's line numbers at line 2). Changed lines now read:\n"
        "     1\tdef add(a, b):\n     2\t    return a + b\n     3\t\n     4\t",
        data={"file_path": str(f), "replacements": 1, "match": "gutter",
              "diff": "--- a/app.py\n+++ b/app.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a+b\n+    return a + b\n"
                      " \n \n def sub(a, b):\n"})
    assert f.read_text() == SOURCE.replace("a+b", "a + b")


def test_wrong_indentation_matches_ignoring_whitespace_and_new_string_is_reindented(tmp_path):
    f, ctx = setup(tmp_path)
    result = edit(ctx, file_path="app.py", old_string="\treturn  a+b", new_string="\treturn a + b")
    assert (result.content, result.data["match"]) == (
        "Edited app.py (1 replacement; matched ignoring whitespace at line 2). Changed lines now read:\n"
        "     1\tdef add(a, b):\n     2\t    return a + b\n     3\t\n     4\t", "whitespace")
    assert f.read_text() == SOURCE.replace("a+b", "a + b")


def test_a_function_written_on_one_line_edits_the_real_lines(tmp_path):
    # What the 1.5B sends again and again: a three-line function flattened into one line, old and new alike.
    text = "import math\n\n\ndef area(r):\n    r2 = r * r\n    return math.pi * r2\n"
    f, ctx = setup(tmp_path, text, "geo.py")
    result = edit(ctx, file_path="geo.py", old_string="def area(r): r2 = r * r return math.pi * r2",
                  new_string="def area(r): r2 = r ** 2 return math.pi * r2")
    assert (result.is_error, result.data["match"]) == (False, "whitespace")
    assert result.content.startswith("Edited geo.py (1 replacement; matched ignoring whitespace at lines 4-6).")
    assert f.read_text() == text.replace("r * r", "r ** 2")


def test_not_found_without_similar_text(tmp_path):
    _, ctx = setup(tmp_path)
    assert edit(ctx, file_path="app.py", old_string="class Nothing:", new_string="x").content == (
        "app.py: old_string was not found in the file. No similar text either; Read the file to see its current content.")


def test_not_unique_lists_lines_then_replace_all(tmp_path):
    f, ctx = setup(tmp_path)
    assert edit(ctx, file_path="app.py", old_string="(a, b)", new_string="(x, y)") == ToolResult(
        "app.py: old_string occurs 2 times (lines 1, 5). Add surrounding lines to old_string to make it unique, "
        "or set replace_all to true to change every occurrence.", is_error=True)
    result = edit(ctx, file_path="app.py", old_string="(a, b)", new_string="(x, y)", replace_all=True)
    assert result.content.startswith("Edited app.py (2 replacements). Changed lines now read:\n     1\tdef add(x, y):")
    assert result.data["replacements"] == 2
    assert f.read_text() == SOURCE.replace("(a, b)", "(x, y)")


def test_identical_strings_rejected(tmp_path):
    _, ctx = setup(tmp_path)
    assert edit(ctx, file_path="app.py", old_string="a+b", new_string="a+b") == ToolResult(
        "app.py: old_string and new_string are identical; there is nothing to change.", is_error=True)


def test_crlf_and_mode_preserved(tmp_path):
    f = tmp_path / "build.sh"
    f.write_bytes(b"#!/bin/sh\r\necho one\r\necho two\r\n")
    f.chmod(0o755)
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "build.sh"}, ctx)
    result = edit(ctx, file_path="build.sh", old_string="echo one\necho two", new_string="echo 1\necho 2\necho 3")
    assert not result.is_error
    assert f.read_bytes() == b"#!/bin/sh\r\necho 1\r\necho 2\r\necho 3\r\n"
    assert f.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build.sh"]


def test_empty_old_string_creates_a_file_but_never_clobbers_one(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    result = edit(ctx, file_path="pkg/new.py", old_string="", new_string="x = 1\n")
    assert result.content == "Created pkg/new.py (1 replacement). Changed lines now read:\n     1\tx = 1\n     2\t"
    assert (tmp_path / "pkg/new.py").read_text() == "x = 1\n"
    assert edit(ctx, file_path="pkg/new.py", old_string="", new_string="y").content == (
        "pkg/new.py: old_string is empty, but the file is not; give the exact text to replace "
        "(use Write to replace the whole file).")


def test_missing_and_binary_files(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    (tmp_path / "main.py").write_text("")
    assert edit(ctx, file_path="mian.py", old_string="a", new_string="b") == ToolResult(
        "File does not exist: mian.py. Did you mean: main.py? To create a file use Write.", is_error=True)
    (tmp_path / "data.bin").write_bytes(b"\x00\x01abc")
    ReadTool().run({"file_path": "data.bin"}, ctx)
    assert edit(ctx, file_path="data.bin", old_string="abc", new_string="d") == ToolResult(
        "data.bin is not a UTF-8 text file; Edit works on text files only.", is_error=True)


def test_multiedit_applies_in_order(tmp_path):
    f, ctx = setup(tmp_path)
    result = MultiEditTool().run({"file_path": "app.py", "edits": [
        {"old_string": "a-b", "new_string": "a - b"},
        {"old_string": "return a - b", "new_string": "return -(b - a)"},  # sees the first edit's result
        {"old_string": "(a, b)", "new_string": "(p, q)", "replace_all": True},
    ]}, ctx)
    assert result.content.startswith("Edited app.py (3 edits). Changed lines now read:\n")
    assert (result.data["replacements"], result.data["match"]) == (4, "exact")
    assert f.read_text() == "def add(p, q):\n    return a+b\n\n\ndef sub(p, q):\n    return -(b - a)\n"


def test_multiedit_is_all_or_nothing(tmp_path):
    f, ctx = setup(tmp_path)
    result = MultiEditTool().run({"file_path": "app.py", "edits": [
        {"old_string": "a-b", "new_string": "a - b"},
        {"old_string": "return", "new_string": "yield"},
    ]}, ctx)
    assert result == ToolResult(
        "Edit 2 of 2 failed, so no edit was written: old_string occurs 2 times (lines 2, 6). Add surrounding lines "
        "to old_string to make it unique, or set replace_all to true to change every occurrence.", is_error=True)
    assert f.read_text() == SOURCE


def test_multiedit_argument_errors(tmp_path):
    _, ctx = setup(tmp_path)
    assert MultiEditTool().run({"file_path": "app.py", "edits": []}, ctx).content == \
        "edits is empty; give at least one {old_string, new_string}."
    assert MultiEditTool().run({"file_path": "app.py", "edits": [{"old_string": "a"}]}, ctx).content == \
        "In edits[0]: Missing required argument(s): new_string."


def test_multiedit_names_the_edits_that_matched_loosely(tmp_path):
    f, ctx = setup(tmp_path)
    result = MultiEditTool().run({"file_path": "app.py", "edits": [
        {"old_string": "a+b", "new_string": "a + b"},
        {"old_string": "def sub(a, b): return a-b", "new_string": "def sub(a, b): return a - b"},
        {"old_string": "     1\tdef add(a, b):", "new_string": "def add(a, b):  # sum"},
    ]}, ctx)
    assert (result.content.split("\n")[0], result.data["match"]) == (
        "Edited app.py (3 edits; edit 2 matched ignoring whitespace at lines 5-6; edit 3 matched without Read's "
        "line numbers at line 1). Changed lines now read:", "whitespace")
    assert f.read_text() == "def add(a, b):  # sum\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def test_an_edit_of_equal_length_within_the_same_second_runs_the_new_code(tmp_path):
    """Python reuses a .pyc whose source has the same size and mtime second: the edit drops the cached bytecode."""
    import subprocess
    import sys
    f = tmp_path / "limits.py"
    f.write_text("LIMIT = 1\n")
    run = lambda: subprocess.run([sys.executable, "-c", "import limits; print(limits.LIMIT)"], cwd=tmp_path,  # noqa: E731
                                 capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""}).stdout
    assert run() == "1\n" and list((tmp_path / "__pycache__").glob("limits.*.pyc"))
    before = f.stat()
    ctx = ToolContext(cwd=tmp_path)
    ReadTool().run({"file_path": "limits.py"}, ctx)
    assert not edit(ctx, file_path="limits.py", old_string="LIMIT = 1", new_string="LIMIT = 2").is_error
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same second, as a quick edit would have
    assert run() == "2\n"

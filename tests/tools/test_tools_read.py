"""Read: numbered lines, windows of long files, truncation notes, binaries described, helpful errors."""
from __future__ import annotations

import os
import struct
import zlib

from tools.base import FileStamp, ToolContext, ToolResult
from tools.read import ReadTool


def read(ctx, **args) -> ToolResult:
    return ReadTool().run(args, ctx)


def test_numbered_lines_and_stamp(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("import os\n\nprint(os.name)\n")
    ctx = ToolContext(cwd=tmp_path)
    result = read(ctx, file_path="a.py")
    assert result == ToolResult("     1\timport os\n     2\t\n     3\tprint(os.name)",
                                data={"file_path": str(f), "start_line": 1, "num_lines": 3, "total_lines": 3})
    st = f.stat()
    assert ctx.read_files == {str(f): FileStamp(st.st_mtime_ns, st.st_size)}


def test_absolute_path_and_crlf_shown_without_carriage_returns(tmp_path):
    f = tmp_path / "w.txt"
    f.write_bytes(b"one\r\ntwo\r\n")
    assert read(ToolContext(cwd=tmp_path / "elsewhere"), file_path=str(f)).content == "     1\tone\n     2\ttwo"


def test_offset_and_limit_with_note_on_how_to_read_more(tmp_path):
    (tmp_path / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    result = read(ToolContext(cwd=tmp_path), file_path="long.txt", offset=10, limit=3)
    assert result.content == ("    10\tline 10\n    11\tline 11\n    12\tline 12\n"
                              "[Showing lines 10-12 of 100. To read more, call Read with offset=13 (and a limit), "
                              "or use Grep to find the lines you need.]")
    assert not result.is_error


def test_default_limit_is_2000_lines(tmp_path):
    (tmp_path / "big.txt").write_text("x\n" * 2500)
    result = read(ToolContext(cwd=tmp_path), file_path="big.txt")
    rows = result.content.split("\n")
    assert len(rows) == 2001 and rows[1999] == "  2000\tx"
    assert rows[-1].startswith("[Showing lines 1-2000 of 2500. To read more, call Read with offset=2001")


def test_a_read_window_replaces_the_default_and_any_explicit_limit_and_keeps_the_tail(tmp_path):
    (tmp_path / "big.txt").write_text("".join(f"row {i}\n" for i in range(1, 1201)))
    ctx = ToolContext(cwd=tmp_path, read_window=200)  # as the harness sets it for a small model
    for args in ({}, {"limit": 2000}, {"offset": 73, "limit": 2000}):
        start = args.get("offset", 1)
        rows = read(ctx, file_path="big.txt", **args).content.split("\n")
        assert len(rows) == 201 and rows[0] == f"{start:>6}\trow {start}" and rows[199].endswith(f"row {start + 199}")
        assert rows[-1] == (f"[Showing lines {start}-{start + 199} of 1200. To read more, call Read with "
                            f"offset={start + 200} (and a limit), or use Grep to find the lines you need.]")
    assert read(ctx, file_path="big.txt", offset=5, limit=3).content.count("\trow ") == 200  # smaller ones too
    (tmp_path / "short.txt").write_text("a\nb\n")
    assert read(ctx, file_path="short.txt").content == "     1\ta\n     2\tb"  # short files: no note


def test_whole_result_capped_in_characters(tmp_path):
    (tmp_path / "wide.txt").write_text(("y" * 99 + "\n") * 100)
    result = ReadTool(max_chars=1000).run({"file_path": "wide.txt"}, ToolContext(cwd=tmp_path))
    rows = result.content.split("\n")
    assert rows[:-1] == [f"{n:>6}\t{'y' * 99}" for n in range(1, 10)]  # 9 rows of 106 characters fit in 1000
    assert rows[-1].startswith("[Showing lines 1-9 of 100. To read more, call Read with offset=10")


def test_long_line_truncated_with_note(tmp_path):
    (tmp_path / "min.js").write_text("a" * 2500 + "\nshort\n")
    result = read(ToolContext(cwd=tmp_path), file_path="min.js")
    assert result.content == ("     1\t" + "a" * 2000 + "... [line truncated, 2500 characters]\n     2\tshort\n"
                              "[1 line(s) longer than 2000 characters were truncated.]")


def test_binary_file_described_not_dumped(tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02garbage" * 100)
    result = read(ToolContext(cwd=tmp_path), file_path="blob.bin")
    assert result.content == "blob.bin: binary data, 1000 bytes. Its contents are not shown as text."
    assert not result.is_error


def test_invalid_utf8_is_binary(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    assert read(ToolContext(cwd=tmp_path), file_path="latin1.txt").content == \
        "latin1.txt: non-UTF-8 data (binary, or text in another encoding), 13 bytes. Its contents are not shown as text."


def test_utf8_character_cut_at_sniff_boundary_is_still_text(tmp_path):
    (tmp_path / "u.txt").write_text("a" * 8191 + "é\n")  # the two-byte é straddles the 8192-byte sniff window
    assert read(ToolContext(cwd=tmp_path), file_path="u.txt").content == "     1\t" + "a" * 2000 + \
        "... [line truncated, 8192 characters]\n[1 line(s) longer than 2000 characters were truncated.]"


def test_png_described_with_dimensions(tmp_path):
    ihdr = struct.pack(">IIBBBBB", 64, 48, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    (tmp_path / "logo.png").write_bytes(png)
    ctx = ToolContext(cwd=tmp_path)
    result = read(ctx, file_path="logo.png")
    assert result.content == "logo.png: PNG image, 33 bytes, 64x48 pixels. Its contents are not shown as text."
    assert str(tmp_path / "logo.png") in ctx.read_files


def test_directory_is_an_error_that_lists_its_entries(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "b.py").write_text("")
    (tmp_path / "src" / "A.txt").write_text("")
    assert read(ToolContext(cwd=tmp_path), file_path="src") == ToolResult(
        "src is a directory, not a file. It contains: A.txt, b.py, pkg/. Read a file by its path.", is_error=True)
    for i in range(45):
        (tmp_path / "src" / f"f{i:02}").write_text("")
    many = read(ToolContext(cwd=tmp_path), file_path="src").content
    assert many.endswith(" and 8 more. Read a file by its path.") and "f37" in many and "f38" not in many


def test_fifo_is_refused_instead_of_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    assert read(ToolContext(cwd=tmp_path), file_path="pipe") == ToolResult(
        "pipe is not a regular file (a pipe, socket or device); it cannot be read.", is_error=True)


def test_missing_file_suggests_close_names(tmp_path):
    (tmp_path / "config.yaml").write_text("a: 1\n")
    (tmp_path / "config.json").write_text("{}\n")
    (tmp_path / "other.txt").write_text("\n")
    result = read(ToolContext(cwd=tmp_path), file_path="config.yml")
    assert result == ToolResult("File does not exist: config.yml. Did you mean: config.yaml, config.json?",
                                is_error=True)
    assert read(ToolContext(cwd=tmp_path), file_path="nodir/x.py").content == \
        "File does not exist: nodir/x.py. Its directory nodir does not exist either."


def test_empty_file_and_offset_past_end(tmp_path):
    (tmp_path / "empty").write_text("")
    (tmp_path / "two").write_text("a\nb\n")
    ctx = ToolContext(cwd=tmp_path)
    assert read(ctx, file_path="empty").content == "empty is empty."
    result = read(ctx, file_path="two", offset=5)
    assert (result.content, result.is_error) == ("two has 2 lines; offset 5 is past the end.", True)


def test_bad_arguments_are_one_line_errors(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    assert read(ctx) == ToolResult("Missing required argument(s): file_path.", is_error=True)
    assert read(ctx, file_path="x", offset="ten") == ToolResult("Argument offset must be an integer, got str.",
                                                                is_error=True)
    (tmp_path / "x").write_text("1\n2\n3\n")
    assert read(ctx, file_path="x", offset="2", limit=1).content.startswith("     2\t2\n")  # numeric strings coerced

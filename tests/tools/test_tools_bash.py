"""Bash: real subprocesses; exit code, duration, persistent cwd, timeouts and cancel kill the whole group."""
from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

from tools.bash import BashTool
from tools.base import ToolContext


def gone(pid: int) -> bool:
    """The process no longer runs (an unreaped zombie counts as gone: it cannot run again)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.02)
    return gone(pid)


def test_output_merged_in_order_with_exit_code_and_duration(tmp_path):
    result = BashTool().run({"command": "echo out1; echo err1 >&2; echo out2; exit 3"}, ToolContext(cwd=tmp_path))
    assert re.fullmatch(r"out1\nerr1\nout2\n\[exit code 3, \d+\.\d\ds\]", result.content), result.content
    assert not result.is_error
    assert result.data["exit_code"] == 3
    assert 0 <= result.data["duration_ms"] < 5000
    assert result.data["cwd"] == str(tmp_path)


def test_cwd_persists_between_calls_and_exit_code_is_kept(tmp_path):
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    ctx = ToolContext(cwd=tmp_path)
    tool = BashTool()
    first = tool.run({"command": "cd sub && false"}, ctx)
    assert first.data["exit_code"] == 1
    assert ctx.shell_cwd == (tmp_path / "sub").resolve()
    second = tool.run({"command": "pwd"}, ctx)
    assert second.content.startswith(f"{(tmp_path / 'sub').resolve()}\n[exit code 0, ")
    third = tool.run({"command": "cd deeper; exit 7"}, ctx)  # an explicit exit still records the cwd
    assert (third.data["exit_code"], ctx.shell_cwd) == (7, (tmp_path / "sub" / "deeper").resolve())


def test_error_line_numbers_and_no_output(tmp_path):
    tool, ctx = BashTool(), ToolContext(cwd=tmp_path)
    result = tool.run({"command": "no_such_command_xyz"}, ctx)
    assert result.content.startswith("bash: line 1: no_such_command_xyz: command not found\n[exit code 127, ")
    assert tool.run({"command": "true"}, ctx).content.startswith("(no output)\n[exit code 0, ")


def test_stdin_is_closed_and_env_is_passed(tmp_path):
    ctx = ToolContext(cwd=tmp_path, env={"AGENT_TEST_VAR": "hello"})
    result = BashTool().run({"command": "cat; echo \"$AGENT_TEST_VAR $HOME\"", "timeout": 5000}, ctx)
    assert result.content.startswith(f"hello {os.environ['HOME']}\n[exit code 0, ")


def test_timeout_kills_the_process_group(tmp_path):
    started = time.monotonic()
    result = BashTool().run({"command": "sleep 30 & echo $!; wait", "timeout": 500}, ToolContext(cwd=tmp_path))
    elapsed = time.monotonic() - started
    child = int(result.content.split("\n")[0])
    assert result.is_error and result.data["timed_out"]
    assert result.content == f"{child}\n[Timed out after 0.5s; the command and its child processes were killed.]"
    assert wait_gone(child)
    assert elapsed < 3.0


def test_children_ignoring_sigterm_are_killed_after_the_grace_period(tmp_path):
    tool = BashTool(kill_grace_s=0.3)
    started = time.monotonic()
    result = tool.run({"command": "trap '' TERM; sleep 30 & echo $!; wait", "timeout": 300}, ToolContext(cwd=tmp_path))
    child = int(result.content.split("\n")[0])
    assert result.data["timed_out"] and result.data["exit_code"] == 128 + signal.SIGKILL
    assert wait_gone(child)
    assert time.monotonic() - started < 3.0


def test_cancel_from_another_thread(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    threading.Timer(0.3, ctx.cancel.set).start()
    started = time.monotonic()
    result = BashTool().run({"command": "echo started; sleep 30 & echo $!; wait"}, ctx)
    lines = result.content.split("\n")
    assert result.is_error and result.data["cancelled"]
    assert lines[0] == "started" and lines[2] == "[Cancelled by the user; the command and its child processes were killed.]"
    assert wait_gone(int(lines[1]))
    assert time.monotonic() - started < 3.0


def test_huge_output_keeps_head_and_tail_and_saves_the_rest(tmp_path):
    result = BashTool().run({"command": "seq 1 100000"}, ToolContext(cwd=tmp_path))
    saved = Path(result.data["output_file"])
    try:
        full = "".join(f"{i}\n" for i in range(1, 100001))
        assert saved.read_text() == full
        lines = result.content.split("\n")
        assert lines[:3] == ["1", "2", "3"]
        assert lines[-3:-1] == ["100000", f"[Output was {len(full)} bytes; the full output is saved in {saved}: "
                                          "Read it with offset/limit or Grep it.]"]
        assert re.search(r"\n\[\.\.\. \d+ bytes omitted \.\.\.\]\n", result.content)
        assert len(result.content) < 31_000
        head, tail = result.content.split(" bytes omitted ...]\n")
        assert full.startswith(head[: head.rfind("[...")]) and tail.startswith("9")  # whole lines on both sides
    finally:
        saved.unlink()


def test_vanished_cwd_falls_back_to_project_root(tmp_path):
    (tmp_path / "tmpdir").mkdir()
    ctx = ToolContext(cwd=tmp_path, shell_cwd=tmp_path / "tmpdir")
    (tmp_path / "tmpdir").rmdir()
    result = BashTool().run({"command": "pwd"}, ctx)
    assert result.content.startswith("[The previous working directory no longer exists; this ran in the project "
                                     f"root.]\n{tmp_path.resolve()}\n[exit code 0, ")


def test_argument_errors(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    assert BashTool().run({"command": "  "}, ctx).content == "command is empty."
    assert BashTool().run({}, ctx).content == "Missing required argument(s): command."

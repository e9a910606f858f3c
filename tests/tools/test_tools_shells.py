"""Background shells: Bash(run_in_background) -> a shell id, BashOutput reads new output, KillShell stops the group.

Real processes throughout; every test checks that what it started is gone afterwards.
"""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from tools import builtin_tools
from tools.base import ToolContext
from tools.bash import BashTool
from tools.bash_output import BashOutputTool
from tools.kill_shell import KillShellTool
from tools.shells import ShellRegistry


def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_for(predicate, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture
def ctx(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    yield ctx
    ctx.shells.stop_all(grace_s=0.5)


def start(ctx, command: str) -> str:
    result = BashTool().run({"command": command, "run_in_background": True}, ctx)
    assert not result.is_error, result.content
    return result.data["shell_id"]


def read(ctx, shell_id: str, **extra) -> str:
    return BashOutputTool().run({"bash_id": shell_id, **extra}, ctx).content


def test_background_returns_a_shell_id_and_the_process_runs(ctx):
    result = BashTool().run({"command": "sleep 30", "run_in_background": True}, ctx)
    assert result.content == ('Command running in background with ID: bash_1. Read its new output with '
                              'BashOutput(bash_id="bash_1"); stop it with KillShell(shell_id="bash_1").')
    assert result.data == {"shell_id": "bash_1", "pid": result.data["pid"], "background": True}
    assert not gone(result.data["pid"])
    assert os.getpgid(result.data["pid"]) == result.data["pid"]  # its own process group


def test_bash_output_returns_only_new_output(ctx):
    sid = start(ctx, "echo one; sleep 0.3; echo two; sleep 30")
    assert wait_for(lambda: ctx.shells.get(sid).total_bytes >= 4)
    assert read(ctx, sid) == "<status>running</status>\n\n<stdout>\none\n</stdout>"
    assert wait_for(lambda: ctx.shells.get(sid).total_bytes >= 8)
    assert read(ctx, sid) == "<status>running</status>\n\n<stdout>\ntwo\n</stdout>"
    assert read(ctx, sid) == "<status>running</status>\n\n<stdout>(no new output)</stdout>"


def test_bash_output_reports_exit_code_when_finished(ctx):
    sid = start(ctx, "echo done; echo oops >&2; exit 3")
    assert wait_for(lambda: ctx.shells.get(sid).status != "running")
    result = BashOutputTool().run({"bash_id": sid}, ctx)
    assert result.content == "<status>failed</status>\n\n<exit_code>3</exit_code>\n\n<stdout>\ndone\noops\n</stdout>"
    assert result.data == {"shell_id": sid, "status": "failed", "exit_code": 3, "dropped_bytes": 0}


def test_filter_keeps_matching_lines_and_discards_the_rest(ctx):
    sid = start(ctx, "printf 'GET /a 200\\nGET /b 500\\nPOST /c 500\\nGET /d 200\\n'")
    assert wait_for(lambda: ctx.shells.get(sid).status == "completed")
    assert read(ctx, sid, filter="500") == ("<status>completed</status>\n\n<exit_code>0</exit_code>\n\n"
                                           "<stdout>\nGET /b 500\nPOST /c 500\n</stdout>")
    assert read(ctx, sid).endswith("<stdout>(no new output)</stdout>")  # the other lines are gone


def test_filter_waits_for_a_whole_line(ctx):
    sid = start(ctx, "printf 'ERR par'; sleep 0.4; printf 'tial\\nok\\n'; sleep 30")
    assert wait_for(lambda: ctx.shells.get(sid).total_bytes >= 7)
    assert read(ctx, sid, filter="ERR") == "<status>running</status>\n\n<stdout>(no new output)</stdout>"
    assert wait_for(lambda: ctx.shells.get(sid).total_bytes >= 15)
    assert read(ctx, sid, filter="ERR") == "<status>running</status>\n\n<stdout>\nERR partial\n</stdout>"


def test_bad_filter_and_unknown_id_are_one_line_errors(ctx):
    sid = start(ctx, "sleep 30")
    bad = BashOutputTool().run({"bash_id": sid, "filter": "("}, ctx)
    assert bad.is_error and bad.content.startswith("filter is not a valid regular expression: ")
    unknown = BashOutputTool().run({"bash_id": "bash_9"}, ctx)
    assert (unknown.is_error, unknown.content) == (True, "No background shell 'bash_9' (shells: bash_1).")
    kill = KillShellTool().run({"shell_id": "nope"}, ctx)
    assert (kill.is_error, kill.content) == (True, "No background shell 'nope' (shells: bash_1).")


def test_kill_shell_stops_the_whole_group(ctx, tmp_path):
    sid = start(ctx, "sleep 60 & echo $! > child.pid; sleep 60")
    assert wait_for(lambda: (tmp_path / "child.pid").is_file() and (tmp_path / "child.pid").read_text().strip())
    child, leader = int((tmp_path / "child.pid").read_text()), ctx.shells.get(sid).pid
    result = KillShellTool().run({"shell_id": sid}, ctx)
    assert result.content == f"Successfully killed shell: {sid} (sleep 60 & echo $! > child.pid; sleep 60)"
    assert wait_for(lambda: gone(child) and gone(leader))
    assert read(ctx, sid).startswith("<status>killed</status>")


def test_kill_shell_gets_past_a_sigterm_trap(ctx):
    sid = start(ctx, "trap '' TERM; echo ready; while true; do sleep 0.1; done")
    assert wait_for(lambda: ctx.shells.get(sid).total_bytes > 0)
    ctx.shells.kill(sid, grace_s=0.3)
    assert wait_for(lambda: gone(ctx.shells.get(sid).pid), within=3)
    assert ctx.shells.get(sid).status == "killed"


def test_kill_of_a_finished_shell_says_so(ctx):
    sid = start(ctx, "true")
    assert wait_for(lambda: ctx.shells.get(sid).status == "completed")
    result = KillShellTool().run({"shell_id": sid}, ctx)
    assert result.content == f"Shell {sid} had already finished (completed, exit code 0); any processes it left were stopped."


def test_stop_all_ends_every_shell_at_once(tmp_path):
    registry = ShellRegistry()
    ctx = ToolContext(cwd=tmp_path, shells=registry)
    sids = [start(ctx, "trap '' TERM; sleep 60") for _ in range(3)]
    pids = [registry.get(s).pid for s in sids]
    started = time.monotonic()
    assert registry.stop_all(grace_s=0.5) == 3
    assert time.monotonic() - started < 2.5  # one shared grace period, not one each
    assert all(gone(p) for p in pids)
    assert [registry.get(s).status for s in sids] == ["killed"] * 3


def test_running_shells_are_capped(tmp_path):
    ctx = ToolContext(cwd=tmp_path, shells=ShellRegistry(max_running=2))
    try:
        start(ctx, "sleep 60")
        start(ctx, "sleep 60")
        third = BashTool().run({"command": "sleep 60", "run_in_background": True}, ctx)
        assert third.is_error
        assert third.content == ("Cannot start it in the background: 2 background shells are already running; "
                                 "stop one with KillShell first.")
        assert len(ctx.shells.shells) == 2
    finally:
        ctx.shells.stop_all(grace_s=0.2)


def test_unread_output_is_capped_and_the_loss_is_reported(tmp_path):
    ctx = ToolContext(cwd=tmp_path, shells=ShellRegistry(max_unread_bytes=10_000))
    try:
        sid = start(ctx, "seq 1 20000")
        assert wait_for(lambda: ctx.shells.get(sid).status == "completed" and not ctx.shells.get(sid)._reader.is_alive())
        result = BashOutputTool().run({"bash_id": sid}, ctx)
        total = sum(len(f"{i}\n") for i in range(1, 20001))
        assert result.data["dropped_bytes"] == total - 10_000
        assert f"[... {total - 10_000} bytes of output were dropped before this read: read more often ...]" in result.content
        assert result.content.endswith("19999\n20000\n</stdout>")
    finally:
        ctx.shells.stop_all(grace_s=0.2)


def test_multibyte_output_split_across_reads_decodes(ctx):
    sid = start(ctx, "printf '\\xc3'; sleep 0.3; printf '\\xa9t\\xc3\\xa9\\n'; sleep 30")
    assert wait_for(lambda: ctx.shells.get(sid).total_bytes >= 1)
    first = read(ctx, sid)
    assert wait_for(lambda: ctx.shells.get(sid).total_bytes >= 6)
    second = read(ctx, sid)
    assert first == "<status>running</status>\n\n<stdout>(no new output)</stdout>"
    assert second == "<status>running</status>\n\n<stdout>\nété\n</stdout>"


def test_shell_runs_in_the_bash_cwd_with_settings_env(ctx, tmp_path):
    (tmp_path / "sub").mkdir()
    ctx.env["GREETING"] = "hi"
    BashTool().run({"command": "cd sub"}, ctx)
    sid = start(ctx, "pwd; echo $GREETING")
    assert wait_for(lambda: ctx.shells.get(sid).status == "completed")
    assert read(ctx, sid).endswith(f"<stdout>\n{(tmp_path / 'sub').resolve()}\nhi\n</stdout>")


def test_tools_are_offered_in_a_fixed_order():
    names = [t.name for t in builtin_tools()]
    assert names == ["Read", "Write", "Edit", "MultiEdit", "Bash", "BashOutput", "KillShell", "Grep", "Glob", "LS",
                     "TodoWrite", "WebFetch"]
    assert BashOutputTool.input_schema["required"] == ["bash_id"]
    assert list(BashOutputTool.input_schema["properties"]) == ["bash_id", "filter"]
    assert KillShellTool.input_schema["required"] == ["shell_id"]


def test_foreground_leftovers_are_recorded_and_stopped(ctx, tmp_path):
    result = BashTool().run({"command": "sleep 60 & echo $!"}, ctx)
    pid = int(result.content.split("\n")[0])
    assert "Processes it started are still running; they will be stopped when the session ends." in result.content
    assert ctx.shells.leftover_groups == {os.getpgid(pid)}
    assert not gone(pid)
    ctx.shells.stop_all(grace_s=0.3)
    assert wait_for(lambda: gone(pid))
    assert ctx.shells.leftover_groups == set()


def test_signal_numbers_map_to_exit_codes(ctx):
    sid = start(ctx, "kill -TERM $$")
    assert wait_for(lambda: ctx.shells.get(sid).status != "running")
    assert ctx.shells.get(sid).exit_code == 128 + signal.SIGTERM
    assert re.search(r"<exit_code>143</exit_code>", read(ctx, sid))

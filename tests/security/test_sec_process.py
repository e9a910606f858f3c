"""Security classes 11 and 12: Bash output kept bounded and readable, and no process outliving the session.

Class 11: spill files keep a head and a tail under a cap, live in the session's output directory (which
Read may open and the session removes). Class 12: background shells and groups left by `cmd &` are
stopped at the end of a session, also when SIGTERM, SIGHUP or SIGINT ends a headless run (which still
prints its result). Every test checks the processes (by pid) and the directories afterwards.
"""
from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.core.context import tools_for_profile
from agent.core.profile import choose_profile
from agent.engines.scripted import ScriptedEngine
from agent.session.assembly import offered_tools
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from agent.session.status import format_place
from agent.ui.slash import SlashRegistry
from tools import builtin_tools
from tools.base import ToolContext
from tools.bash import BashTool
from tools.read import ReadTool

REPO = Path(__file__).resolve().parents[2]


def gone(pid: int) -> bool:
    """The process no longer runs (an unreaped zombie counts as gone)."""
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


def pid_in(path: Path, within: float = 10.0) -> int:
    assert wait_for(lambda: path.is_file() and path.read_text().strip().isdigit(), within), f"no pid in {path}"
    return int(path.read_text())


@pytest.fixture
def env(tmp_path, monkeypatch):
    home, tmpdir = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmpdir.mkdir()
    values = {"AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "agenthome"), "HOME": str(home),
              "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **values, "TMPDIR": str(tmpdir), "PYTHONPATH": str(REPO)}


@pytest.fixture
def proj(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    return p


def script_args(tmp_path, turns) -> list[str]:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns))
    return ["--engine", "scripted", "--script", str(path)]


def bash(command: str, **extra) -> dict:
    return {"name": "Bash", "arguments": {"command": command, **extra}}


def turns(*calls, answer="done") -> list:
    return [{"text": "", "tool_calls": [c]} for c in calls] + [{"text": answer}]


def core_for(proj, script) -> object:
    return build_session(SessionOptions(project=proj, engine="scripted", permission_mode="bypassPermissions"),
                         engine=ScriptedEngine(script))


# ---- class 11: spill files

@pytest.fixture
def spill_ctx(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    ctx = ToolContext(cwd=tmp_path, output_dir=out)
    yield ctx
    ctx.shells.stop_all(grace_s=0.2)


def test_yes_for_a_second_leaves_a_capped_file(spill_ctx):
    tool = BashTool(spill_head_bytes=64 * 1024, spill_tail_bytes=16 * 1024)
    result = tool.run({"command": "yes", "timeout": 1000}, spill_ctx)
    saved = Path(result.data["output_file"])
    assert result.data["timed_out"] and saved.parent == spill_ctx.output_dir
    size = saved.stat().st_size
    assert 64 * 1024 + 16 * 1024 < size < 64 * 1024 + 16 * 1024 + 200  # head, tail and one note line
    data = saved.read_bytes()
    assert data.startswith(b"y\ny\n") and data.endswith(b"y\ny\n")
    assert b" bytes of output not kept: the file keeps the first 65536 and the last 16384 bytes ...]\n" in data
    assert "its first 65536 bytes and last 16384 bytes are saved in" in result.content
    assert sorted(p.name for p in spill_ctx.output_dir.iterdir()) == [saved.name]  # no cwd file left


def test_default_caps_hold_for_thirty_megabytes(spill_ctx):
    result = BashTool().run({"command": "head -c 30000000 /dev/zero | tr '\\0' 'z'"}, spill_ctx)
    saved = Path(result.data["output_file"])
    assert (8 << 20) + (2 << 20) < saved.stat().st_size < (8 << 20) + (2 << 20) + 200
    assert "[Output was 30000000 bytes; its first 8 MB and last 2 MB are saved in " in result.content
    assert len(result.content) < 31_000


def test_head_and_tail_are_the_real_start_and_end(spill_ctx):
    tool = BashTool(spill_head_bytes=100_000, spill_tail_bytes=50_000)
    result = tool.run({"command": "seq 1 200000"}, spill_ctx)
    full = "".join(f"{i}\n" for i in range(1, 200001)).encode()
    data = Path(result.data["output_file"]).read_bytes()
    head, rest = data[:100_000], data[100_000:]
    note, tail = rest.split(b"...]\n", 1)
    assert head == full[:100_000] and tail == full[-len(tail):] and 50_000 <= len(tail) <= 100_000
    assert note == f"\n[... {len(full) - 100_000 - len(tail)} bytes of output not kept: the file keeps the first 100000 and the last {len(tail)} bytes ".encode()
    assert result.content.startswith("1\n2\n3\n") and "\n200000\n[Output was" in result.content


def test_output_that_fits_leaves_no_file(spill_ctx):
    result = BashTool().run({"command": "seq 1 100"}, spill_ctx)
    assert "output_file" not in result.data and list(spill_ctx.output_dir.iterdir()) == []


def test_full_output_under_the_cap_is_saved_whole(spill_ctx):
    result = BashTool().run({"command": "seq 1 100000"}, spill_ctx)
    saved = Path(result.data["output_file"])
    assert saved.read_text() == "".join(f"{i}\n" for i in range(1, 100001))
    assert "the full output is saved in" in result.content


def test_a_cancelled_command_leaves_only_its_output_file(spill_ctx):
    threading.Timer(0.5, spill_ctx.cancel.set).start()
    result = BashTool().run({"command": "seq 1 50000; sleep 30"}, spill_ctx)
    assert result.data["cancelled"]
    assert [p.name for p in spill_ctx.output_dir.iterdir()] == [Path(result.data["output_file"]).name]


def test_the_session_lets_read_open_its_outputs_and_removes_them(proj, env):
    core = core_for(proj, [])
    try:
        result = core.agent.tools["Bash"].run({"command": "seq 1 50000"}, core.ctx)
        saved = Path(result.data["output_file"])
        assert saved.parent == core.ctx.output_dir and saved.parent.parent == Path(env["TMPDIR"]).resolve() or \
            saved.parent.name.startswith("agent-output-")
        core.permissions.set_mode("default")
        for tool, args in [("Read", {"file_path": str(saved)}), ("Grep", {"pattern": "4999", "path": str(saved)})]:
            decision = core.permissions.check(tool, args, True)
            assert decision.behavior == "allow", decision
        elsewhere = saved.parent.parent / "other.txt"
        assert core.permissions.check("Read", {"file_path": str(elsewhere)}, True).behavior == "ask"
        assert core.permissions.check("Edit", {"file_path": str(saved), "old_string": "1", "new_string": "2"},
                                      False).behavior == "ask"
        shown = ReadTool().run({"file_path": str(saved), "offset": 49999}, core.ctx)
        assert shown.content.split("\n")[:2] == [" 49999\t49999", " 50000\t50000"]
    finally:
        core.close()
    assert not saved.parent.exists()


def test_the_read_rule_survives_a_configuration_reload(proj, env):
    core = core_for(proj, [])
    try:
        core.config_changed(set())
        assert core.permissions.check("Read", {"file_path": str(core.ctx.output_dir / "x.log")}, True).behavior == "allow"
    finally:
        core.close()


def test_a_headless_run_removes_its_output_dir(tmp_path, proj, env):
    r = subprocess.run([sys.executable, "-m", "agent", "-p", "count", "--permission-mode", "bypassPermissions",
                        "--output-format", "stream-json", *script_args(tmp_path, turns(bash("seq 1 100000")))],
                       cwd=proj, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    hint = next(x for x in lines if x["type"] == "user")["message"]["content"][0]["content"]
    saved = Path(hint.split("saved in ")[1].split(":")[0])
    assert saved.parent.parent == Path(env["TMPDIR"])
    assert list(Path(env["TMPDIR"]).iterdir()) == []  # the file and its directory are gone


def test_a_session_never_closed_removes_its_output_dir_at_exit(tmp_path, proj, env):
    code = ("import sys\nfrom pathlib import Path\nfrom agent.engines.scripted import ScriptedEngine\n"
            "from agent.session.builder import build_session\nfrom agent.session.options import SessionOptions\n"
            "core = build_session(SessionOptions(project=Path(sys.argv[1]), engine='scripted'), engine=ScriptedEngine([]))\n"
            "print(core.ctx.output_dir)\n")
    r = subprocess.run([sys.executable, "-c", code, str(proj)], cwd=proj, env=env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    made = Path(r.stdout.strip().splitlines()[-1])
    assert made.parent == Path(env["TMPDIR"]) and made.name.startswith("agent-output-")
    assert not made.exists()


# ---- class 12: processes stopped at the end of a session

def test_close_stops_background_shells_and_leftovers(proj, env):
    core = core_for(proj, turns(bash("sleep 60 & echo $! > fg.pid"),
                                bash("sleep 60 & echo $! > bg.pid; wait", run_in_background=True)))
    try:
        core.run("start things", threading.Event())
        fg, bg = pid_in(proj / "fg.pid"), pid_in(proj / "bg.pid")
        assert not gone(fg) and not gone(bg)
        assert core.status().shells == 1
    finally:
        core.close()
    assert wait_for(lambda: gone(fg) and gone(bg), within=3)
    assert core.ctx.shells.running() == []


def test_stop_processes_counts_what_was_running(proj, env):
    core = core_for(proj, [])
    try:
        for _ in range(2):
            core.agent.tools["Bash"].run({"command": "sleep 60", "run_in_background": True}, core.ctx)
        core.agent.tools["Bash"].run({"command": "sleep 60 &"}, core.ctx)
        pids = [s.pid for s in core.ctx.shells.shells.values()]
        assert core.stop_processes() == 3
        assert all(gone(p) for p in pids)
        assert core.stop_processes() == 0
    finally:
        core.close()


def test_a_shell_that_ignores_sigterm_is_killed(proj, env):
    core = core_for(proj, [])
    try:
        core.agent.tools["Bash"].run({"command": "trap '' TERM; echo $$ > stubborn.pid; while :; do sleep 0.1; done",
                                      "run_in_background": True}, core.ctx)
        pid = pid_in(proj / "stubborn.pid")
        started = time.monotonic()
    finally:
        core.close()
    assert gone(pid) and time.monotonic() - started < 5


def test_background_shells_through_the_loop(tmp_path, proj, env):
    script = [{"text": "", "tool_calls": [bash("echo ready; sleep 60", run_in_background=True)]},
              {"text": "", "tool_calls": [{"name": "BashOutput", "arguments": {"bash_id": "bash_1"}}]},
              {"text": "", "tool_calls": [{"name": "KillShell", "arguments": {"shell_id": "bash_1"}}]},
              {"text": "", "tool_calls": [{"name": "BashOutput", "arguments": {"bash_id": "bash_1"}}]},
              {"text": "stopped it"}]
    r = subprocess.run([sys.executable, "-m", "agent", "-p", "serve", "--allowedTools", "Bash",
                        "--output-format", "stream-json", *script_args(tmp_path, script)],
                       cwd=proj, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    results = [x["message"]["content"][0] for x in map(json.loads, r.stdout.splitlines()) if x["type"] == "user"]
    assert [x["is_error"] for x in results] == [False, False, False, False]
    assert results[0]["content"].startswith("Command running in background with ID: bash_1.")
    assert results[1]["content"].startswith("<status>running</status>")  # may be read before "ready" is printed
    assert results[2]["content"] == "Successfully killed shell: bash_1 (echo ready; sleep 60)"
    assert results[3]["content"].startswith("<status>killed</status>")


def headless(tmp_path, proj, env, script, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "agent", "-p", "work", "--permission-mode", "bypassPermissions",
                             "--output-format", "json", *extra, *script_args(tmp_path, script)],
                            cwd=proj, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)


def test_a_headless_run_stops_its_shells_when_it_ends(tmp_path, proj, env):
    script = turns(bash("sleep 60 & echo $! > bg.pid; wait", run_in_background=True),
                   bash("sleep 60 & echo $! > fg.pid"))
    proc = headless(tmp_path, proj, env, script)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["result"] == "done"
    bg, fg = int((proj / "bg.pid").read_text()), int((proj / "fg.pid").read_text())
    assert wait_for(lambda: gone(bg) and gone(fg), within=3)
    assert list(Path(env["TMPDIR"]).iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_prints_the_result_and_kills_every_group(tmp_path, proj, env, sig):
    script = turns(bash("sleep 60 & echo $! > bg.pid; wait", run_in_background=True),
                   bash("sleep 60 & echo $! > fg.pid; sleep 60"), answer="never")
    proc = headless(tmp_path, proj, env, script)
    try:
        bg, fg = pid_in(proj / "bg.pid"), pid_in(proj / "fg.pid")
        t0 = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert time.monotonic() - t0 < 10
    result = json.loads(out)
    assert (proc.returncode, result["stop_reason"], result["result"]) == (1, "cancelled", "interrupted"), err
    assert "Traceback" not in err
    assert wait_for(lambda: gone(bg) and gone(fg), within=3)
    assert list(Path(env["TMPDIR"]).iterdir()) == []
    records = [json.loads(x) for x in next((tmp_path / "data").rglob("*.jsonl")).read_text().splitlines()]
    assert [(r["type"], r.get("reason")) for r in records[-2:]] == [("end", "interrupted"), ("result", None)]


def test_a_second_sigterm_aborts_and_still_stops_the_shells(tmp_path, proj, env):
    script = turns(bash("sleep 60 & echo $! > bg.pid; wait", run_in_background=True),
                   bash("trap '' TERM; echo $$ > fg.pid; while :; do sleep 0.1; done"), answer="never")
    proc = headless(tmp_path, proj, env, script)
    try:
        bg, fg = pid_in(proj / "bg.pid"), pid_in(proj / "fg.pid")
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # the first one is winding down (the foreground group ignores SIGTERM for 2 s)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130 and err.endswith("agent: interrupted\n"), err
    assert wait_for(lambda: gone(bg) and gone(fg), within=5)


# ---- the tools' place in the session

def test_the_small_model_profile_leaves_the_shell_tools_out():
    small, default = choose_profile(500_000_000), choose_profile(None)
    small_names = [t.name for t in tools_for_profile(builtin_tools(), small, "default")]
    default_names = [t.name for t in tools_for_profile(builtin_tools(), default, "default")]
    assert "Bash" in small_names and not {"BashOutput", "KillShell"} & set(small_names)
    assert {"BashOutput", "KillShell"} <= set(default_names)


def test_denying_bash_removes_the_shell_tools():
    names = [t.name for t in offered_tools(["Bash"])]
    assert not {"Bash", "BashOutput", "KillShell"} & set(names)
    assert {"BashOutput", "KillShell"} <= {t.name for t in offered_tools(["Bash(rm:*)"])}


@pytest.mark.parametrize("mode", ["default", "plan", "dontAsk"])
def test_reading_and_stopping_own_shells_needs_no_approval(proj, env, mode):
    core = core_for(proj, [])
    try:
        core.permissions.set_mode(mode)
        for name, args in [("BashOutput", {"bash_id": "bash_1"}), ("KillShell", {"shell_id": "bash_1"})]:
            assert core.permissions.check(name, args, core.agent.tools[name].read_only).behavior == "allow"
        assert core.permissions.check("Bash", {"command": "sleep 1", "run_in_background": True},
                                      False).behavior != "allow" or mode == "bypassPermissions"
    finally:
        core.close()


def test_bashes_lists_shows_and_kills_without_taking_the_models_output(proj, env):
    core = core_for(proj, [])
    registry = SlashRegistry(proj)
    try:
        assert registry.run(core, "/bashes").text == ("No background shells in this session (Bash with "
                                                      "run_in_background starts one).")
        core.agent.tools["Bash"].run({"command": "echo hello; sleep 60", "run_in_background": True}, core.ctx)
        shell = core.ctx.shells.get("bash_1")
        assert wait_for(lambda: shell.total_bytes >= 6)
        listing = registry.run(core, "/bashes").text.split("\n")
        assert listing[0] == "**Background shells** (`/bashes ID` shows one, `/bashes kill ID` stops it)"
        assert listing[1] == "- `bash_1` running · `echo hello; sleep 60`"
        shown = registry.run(core, "/bashes bash_1").text
        assert shown.endswith("`echo hello; sleep 60`\n\n```\nhello\n```")
        assert format_place(core.status()).endswith(" · 1 background shell (/bashes)")
        assert registry.run(core, "/bashes kill bash_1").text == \
            "Killed `bash_1` and its child processes (`echo hello; sleep 60`)."
        assert wait_for(lambda: gone(shell.pid))
        assert core.status().shells == 0
        model_view = core.agent.tools["BashOutput"].run({"bash_id": "bash_1"}, core.ctx).content
        assert model_view == "<status>killed</status>\n\n<exit_code>143</exit_code>\n\n<stdout>\nhello\n</stdout>"
        assert registry.run(core, "/bashes kill nope").text == "No background shell `nope`."
        assert registry.run(core, "/bashes a b c").text.startswith("Usage: ")
    finally:
        core.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_the_tui_quits_on_a_stop_signal_and_stops_its_shells(tmp_path, proj, env, sig):
    pytest.importorskip("textual")
    script = turns(bash("sleep 60 & echo $! > bg.pid; wait", run_in_background=True), answer="started")
    master, slave = pty.openpty()  # the TUI needs a terminal
    proc = subprocess.Popen([sys.executable, "-m", "agent", "--permission-mode", "bypassPermissions",
                             *script_args(tmp_path, script), "start it"], cwd=proj, env={**env, "TERM": "xterm"},
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)

    def drain() -> None:  # keep the terminal's buffer from filling while we wait
        while select.select([master], [], [], 0.05)[0]:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return
    try:
        assert wait_for(lambda: drain() or ((proj / "bg.pid").is_file() and (proj / "bg.pid").read_text().strip()),
                        within=60)
        bg = int((proj / "bg.pid").read_text())
        proc.send_signal(sig)
        assert wait_for(lambda: drain() or proc.poll() is not None, within=20)
    finally:
        proc.kill()
        os.close(master)
    assert proc.returncode == 0
    assert wait_for(lambda: gone(bg), within=3)
    assert list(Path(env["TMPDIR"]).iterdir()) == []


def test_a_removed_output_dir_is_made_again(spill_ctx):
    spill_ctx.output_dir.rmdir()
    result = BashTool().run({"command": "seq 1 50000"}, spill_ctx)
    assert not result.is_error and Path(result.data["output_file"]).parent == spill_ctx.output_dir
    assert Path(result.data["output_file"]).read_text().endswith("49999\n50000\n")

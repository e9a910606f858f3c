"""The bubblewrap sandbox for real where it runs here, and the fallback where it cannot run."""
import os
import socket
import threading
from pathlib import Path

import pytest

from agent.core.sandbox_policy import SandboxPolicy, SandboxSettings, sandbox_from_settings
from sec_support import BWRAP_RUNS, ENV_SECRET, KEY, attack, bash
from tools._sandbox import Bubblewrap

needs_bwrap = pytest.mark.skipif(not BWRAP_RUNS, reason="bubblewrap cannot run on this machine")


class Listener:
    """A TCP server on the host's loopback that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port, self.accepted, self.stop = self.sock.getsockname()[1], 0, threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                continue

    def close(self) -> int:
        self.stop.set()
        self.thread.join()
        self.sock.close()
        return self.accepted


def connect(port: int) -> str:
    return f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=2); print(\"connected\")'"


@pytest.mark.parametrize("sandbox_mode, network, reached", [
    ("off", False, 1),  # the control: without the sandbox the command reaches the host
    ("on", False, 0), ("auto", False, 0), ("auto", True, 1)])
def test_network_is_off_inside_unless_settings_allow_it(world, sandbox_mode, network, reached):
    if sandbox_mode != "off" and not BWRAP_RUNS:
        pytest.skip("bubblewrap cannot run on this machine")
    listener = Listener()
    settings = {"sandbox": {"network": {"allowedDomains": ["*"]}}} if network else {}
    try:
        out = attack(world, [bash(connect(listener.port))], sandbox=sandbox_mode, allowed=("Bash",), settings=settings)
    finally:
        accepted = listener.close()
    assert (accepted, out.changed, out.strays) == (reached, set(), [])


@needs_bwrap
def test_auto_mode_runs_sandboxed_commands_without_asking(world):
    out = attack(world, [bash("touch made.txt && mkdir -p build && echo ok > build/out")], sandbox="auto")
    assert (out.changed, out.strays) == ({"proj/made.txt", "proj/build/out"}, [])


@pytest.mark.parametrize("sandbox_mode", ["on", "auto"])
def test_the_system_home_and_outside_stay_read_only(world, sandbox_mode):
    script = ("for f in /etc/agent-sec-test ~/.bashrc ../outside/secret ../outside/new; do "
              "echo pwned >> $f 2>/dev/null; done; true")
    out = attack(world, [bash(script)], sandbox=sandbox_mode, allowed=("Bash",))
    if BWRAP_RUNS:
        assert (out.changed, out.strays) == (set(), []), out.text
        assert not Path("/etc/agent-sec-test").exists()
    else:  # the fallback: no sandbox, one warning, the rules alone (Bash allowed: it writes)
        assert out.warnings == [w for w in out.warnings if w.startswith("sandbox: ")] and len(out.warnings) == 1


@needs_bwrap
@pytest.mark.parametrize("path, secret", [("~/.ssh/id_rsa", KEY), ("../.env", ENV_SECRET), ("docs/id_rsa", KEY),
                                          (".env", ENV_SECRET), ("secrets/db.txt", "hunter2")])
def test_secrets_and_read_denied_paths_are_hidden_inside(world, path, secret):
    """Code the rules cannot read into (python's open) still cannot read them."""
    target = path.replace("~", str(world.home))
    out = attack(world, [bash(f"python3 -c 'print(open(\"{target}\").read())'")], sandbox="on", allowed=("Bash",),
                 settings={"permissions": {"deny": ["Read(./.env)", "Read(./secrets/**)"]}})
    assert secret not in out.text
    assert (out.changed, out.strays) == (set(), [])


@needs_bwrap
def test_settings_cannot_be_created_from_inside(world):
    """No .claude/ in the project: code inside the sandbox cannot create one with a settings file."""
    code = "import os; os.makedirs('.claude', exist_ok=True); open('.claude/settings.local.json', 'w').write('{}')"
    out = attack(world, [bash(f"python3 -c \"{code}\"")], sandbox="on", allowed=("Bash",))
    assert not (world.proj / ".claude" / "settings.local.json").exists()
    assert (out.changed, out.strays) == (set(), [])


@needs_bwrap
def test_excluded_commands_run_outside_and_follow_the_rules(world):
    settings = {"sandbox": {"enabled": True, "excludedCommands": ["touch:*"]}}
    out = attack(world, [bash("touch made.txt"), bash("mkdir inside")], sandbox=None, settings=settings)
    assert (out.changed, out.strays) == (set(), [])  # mkdir of an empty dir leaves no file
    assert "permission to use Bash was denied" in out.results[0] and "denied" not in out.results[1]
    assert (world.proj / "inside").is_dir()


@pytest.mark.parametrize("sandbox_mode", ["off", "auto"])
def test_a_timeout_kills_everything_the_command_started(world, sandbox_mode):
    command = "sleep 60 & (sleep 60 &) ; sleep 60"
    out = attack(world, [{"name": "Bash", "arguments": {"command": command, "timeout": 1500}}],
                 sandbox=sandbox_mode, allowed=("Bash",))
    assert "Timed out" in out.results[0]
    assert (out.changed, out.strays) == (set(), [])


def test_where_bubblewrap_cannot_run_one_line_says_so_and_the_rules_hold(world, tmp_path, monkeypatch):
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    out = attack(world, [bash("touch made.txt"), bash("cat a.txt")], sandbox="auto")
    assert out.warnings == ["sandbox: bwrap cannot run here: bwrap: No permissions to creating new namespace; "
                            "Bash runs without it, under the permission rules only"]
    assert "permission to use Bash was denied" in out.results[0] and "alpha" in out.results[1]
    assert (out.changed, out.strays) == (set(), [])


def test_a_missing_bubblewrap_is_reported_and_nothing_is_wrapped(tmp_path):
    policy = SandboxPolicy(SandboxSettings(mode="on"), tmp_path, (tmp_path,), bwrap=Bubblewrap("no-such-bwrap"))
    assert policy.start() == ("sandbox: bubblewrap (bwrap) is not installed; Bash runs without it, under the "
                              "permission rules only")
    assert (policy.active, policy.wrap("ls", ["bash", "-c", "ls"], tmp_path)) == (False, ["bash", "-c", "ls"])


@pytest.mark.parametrize("block, expected, warnings", [
    (None, SandboxSettings(), []),
    ({"enabled": True}, SandboxSettings(mode="auto"), []),
    ({"enabled": True, "autoAllowBashIfSandboxed": False}, SandboxSettings(mode="on"), []),
    ({"enabled": True, "excludedCommands": ["docker:*"], "network": {"allowedDomains": ["*"]},
      "filesystem": {"allowWrite": ["~/.cache"], "denyRead": ["~/notes"]}},
     SandboxSettings("auto", ("docker:*",), True, ("~/.cache",), ("~/notes",)), []),
    ({"enabled": True, "network": {"allowedDomains": ["github.com"]}}, SandboxSettings(mode="auto"),
     ["settings: s.json: sandbox.network.allowedDomains: per-domain filtering is not supported here; the network "
      "stays off inside the sandbox (\"*\" turns it on)"]),
    ({"enabled": "yes"}, SandboxSettings(), ["settings: s.json: sandbox.enabled must be true or false; using false"]),
    ([], SandboxSettings(), ["settings: s.json: sandbox must be an object; ignored"]),
])
def test_the_settings_block(block, expected, warnings):
    other = {} if block is None else {"sandbox": (block, "s.json")}
    assert sandbox_from_settings(other) == (expected, warnings)


@needs_bwrap
def test_overlapping_deny_rules_still_start_the_sandbox(world):
    """secrets/ hidden and *.txt hidden: the file inside the hidden directory needs no mount of its own."""
    script = "for f in a.txt secrets/db.txt; do python3 -c \"print(open('$f').read())\"; done; echo end"
    out = attack(world, [bash(script)], sandbox="on", allowed=("Bash",),
                 settings={"permissions": {"deny": ["Read(./secrets/**)", "Read(*.txt)", "Edit(./secrets/**)"]}})
    assert "end" in out.results[0] and "hunter2" not in out.text and "alpha" not in out.text
    assert (out.changed, out.strays) == (set(), [])


@pytest.mark.parametrize("flag, fake_bwrap, made", [
    ("auto", False, BWRAP_RUNS),  # sandboxed and allowed without asking where bubblewrap runs
    ("auto", True, False),  # bubblewrap cannot run: one line on stderr, the rules ask (headless: refused)
    ("off", False, False),
])
def test_the_cli_flag_end_to_end(world, tmp_path, flag, fake_bwrap, made):
    import json
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    if fake_bwrap:
        (tmp_path / "fakebin").mkdir()
        (tmp_path / "fakebin" / "bwrap").write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\n"
                                                    "exit 1\n")
        (tmp_path / "fakebin" / "bwrap").chmod(0o755)
        env["PATH"] = f"{tmp_path / 'fakebin'}:{env['PATH']}"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "", "tool_calls": [bash("touch made.txt")]}, {"text": "done"}]))
    done = subprocess.run([sys.executable, "-m", "agent", "-p", "go", "--engine", "scripted", "--script", str(script),
                           "--sandbox", flag, "--output-format", "json"], cwd=world.proj, env=env,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (world.proj / "made.txt").exists() == made
    notices = [line for line in done.stderr.splitlines() if "sandbox:" in line]
    if fake_bwrap:
        assert notices == ["agent: sandbox: bwrap cannot run here: bwrap: setting up uid map: Permission denied; Bash "
                           "runs without it, under the permission rules only"]
    elif flag == "auto" and not BWRAP_RUNS:  # no bubblewrap that runs here: the one-line fallback notice
        assert len(notices) == 1 and notices[0].endswith("Bash runs without it, under the permission rules only")
    else:
        assert notices == []

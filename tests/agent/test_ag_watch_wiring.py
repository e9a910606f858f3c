"""File watching in a running session: external edits told to the model, configuration reloaded live."""
import json
import threading
import time

import pytest

from agent.engines.scripted import ScriptedEngine
from agent.core.approval import PermissionAnswer
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from agent.ui.slash import SlashRegistry

NOTICE = ("<system-reminder>\nThese files changed on disk since you last read them; Read them again before "
          "editing: {}\n</system-reminder>")


@pytest.fixture
def proj(tmp_path, monkeypatch):
    home = tmp_path / "home"
    p = home / "proj"
    p.mkdir(parents=True)
    for name, value in {"HOME": home, "AGENT_DATA_DIR": tmp_path / "data", "AGENT_HOME": tmp_path / "agenthome",
                        "CLAUDE_CONFIG_DIR": tmp_path / "claude"}.items():
        monkeypatch.setenv(name, str(value))
    (p / "a.py").write_text("x = 1\n")
    return p


def core(proj, turns, notes=None):
    c = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine(list(turns)),
                    notify=(notes.append if notes is not None else None))
    c.ask = lambda request: PermissionAnswer("once")
    return c


def wait_for(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def test_an_external_edit_is_detected_and_told_to_the_model_at_its_next_turn(proj):
    c = core(proj, [{"tool_calls": [call("Read", file_path="a.py")]}, {"text": "x is 1."},
                    {"tool_calls": [call("Edit", file_path="a.py", old_string="x = 1", new_string="x = 3")]},
                    {"tool_calls": [call("Read", file_path="a.py")]}, {"text": "x is 2 now; left it."}])
    try:
        c.run("What is x?", threading.Event())
        (proj / "a.py").write_text("x = 2  # changed by the user\n")
        # The watchdog observer sees it too (the loop also stat-checks read files, so it never waits for it).
        assert wait_for(lambda: c.services.stale.watcher.stale() == {str(proj / "a.py")})
        result = c.run("Set x to 3.", threading.Event())
        requests = c.engine.requests
        assert requests[2].messages[-2:] == [{"role": "user", "content": "Set x to 3."},
                                             {"role": "user", "content": NOTICE.format("a.py")}]
        edit_result = requests[3].messages[-1]
        assert edit_result["role"] == "tool" and "a.py changed on disk since you read it; Read it again." in \
            edit_result["content"]
        # Told once: the next turns carry no second notice; after the re-read it is fresh again.
        notices = [m for m in requests[4].messages if m["content"] == NOTICE.format("a.py")]
        assert len(notices) == 1 and c.services.stale.told == [{str(proj / "a.py")}]
        assert result.text == "x is 2 now; left it." and (proj / "a.py").read_text() == "x = 2  # changed by the user\n"
    finally:
        c.close()


def test_a_file_removed_by_a_command_mid_run_is_told_before_the_next_call(proj):
    c = core(proj, [{"tool_calls": [call("Read", file_path="a.py")]},
                    {"tool_calls": [call("Bash", command="rm a.py")]}, {"text": "Removed."}])
    try:
        c.run("Read a.py, then remove it.", threading.Event())
        last = c.engine.requests[2].messages
        assert [m["role"] for m in last[-3:]] == ["assistant", "tool", "user"]
        assert last[-1]["content"] == NOTICE.format("a.py")
    finally:
        c.close()


def test_settings_hooks_and_commands_reload_while_the_session_runs(proj, tmp_path):
    notes = []
    c = core(proj, [{"text": "One."}, {"text": "Two."}], notes)
    registry = SlashRegistry(proj)
    try:
        c.run("first", threading.Event())
        c.permissions.add_rule("LS", "allow", "session")  # granted in this session: kept across reloads
        assert c.permissions.check("Bash", {"command": "ls"}, False).behavior != "deny"
        assert registry.run(c, "/hello").text == "Unknown command /hello. Type /help for the list."
        marker = tmp_path / "hook-ran.json"
        (proj / ".agent" / "commands").mkdir(parents=True)
        (proj / ".agent" / "commands" / "hello.md").write_text("---\ndescription: Greet\n---\nSay hello.\n")
        (proj / ".agent" / "settings.json").write_text(json.dumps({
            "permissions": {"deny": ["Bash"]}, "env": {"GREETING": "hi"},
            "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": f"cat > '{marker}'"}]}]}}))
        assert wait_for(lambda: c.config_generation >= 1 and "GREETING" in c.ctx.env)
        assert c.permissions.check("Bash", {"command": "ls"}, False).behavior == "deny"
        assert [r.text for r in c.permissions.rules["allow"] if r.source == "session"] == ["LS"]
        assert c.ctx.env == {"GREETING": "hi"}
        assert any(n.startswith("Configuration reloaded (") for n in notes)
        assert registry.run(c, "/hello").prompt == "Say hello."
        c.run("second", threading.Event())
        assert json.loads(marker.read_text())["prompt"] == "second"
    finally:
        c.close()

"""Real shell hooks from settings files, driven through the loop (and `agent -p`) with the scripted engine."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.core import events as ev
from agent.core.context import ContextBuilder
from agent.engines.scripted import ScriptedEngine
from agent.core.results import headless_approver
from agent.services.hook_bridge import HookBridge
from agent.core.approval import PermissionAnswer
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from agent.core.loop import Agent
from agent.core.permissions import Permissions
from agent.core.transcript import Session
from agent.harness.harness import Harness, attach_harness
from agent.harness.tools import harness_tools, offered_order
from hooks.runner import HookRunner
from hooks.settings import load_settings
from tools import builtin_tools
from tools.base import ToolContext

REPO = Path(__file__).resolve().parents[2]
RECORD = '{ cat; echo; } >> "$CLAUDE_PROJECT_DIR"/events.jsonl'
COMMON = {"session_id", "transcript_path", "cwd", "permission_mode", "hook_event_name"}
FIELDS = {"SessionStart": {"source"}, "UserPromptSubmit": {"prompt"},
          "PreToolUse": {"tool_name", "tool_input", "tool_use_id"},
          "PostToolUse": {"tool_name", "tool_input", "tool_use_id", "tool_response"},
          "Stop": {"stop_hook_active"}, "SubagentStop": {"stop_hook_active", "agent_id", "agent_transcript_path"},
          "PreCompact": {"trigger", "custom_instructions"}, "SessionEnd": {"reason"},
          "Notification": {"message", "notification_type"}}


@pytest.fixture
def env(tmp_path, monkeypatch):
    values = {"AGENT_DATA_DIR": tmp_path / "data", "HOME": tmp_path / "home", "AGENT_HOME": tmp_path / "agenthome",
              "CLAUDE_CONFIG_DIR": tmp_path / "claude"}
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))
    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture
def proj(tmp_path, env):
    p = tmp_path / "proj"
    p.mkdir()
    (p / "notes.txt").write_text("The launch code is 4321.\n")
    return p


def hooks_file(proj, hooks, name="settings.json"):
    path = proj / ".claude" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"hooks": hooks}))
    return path


def hook(command, matcher=None, timeout=None):
    entry = {"type": "command", "command": command, **({"timeout": timeout} if timeout else {})}
    return [{**({"matcher": matcher} if matcher is not None else {}), "hooks": [entry]}]


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def make_agent(proj, turns, hooks, *, mode="default"):
    """What `agent -p` builds, in process: settings, hooks, harness; hook notices collected."""
    hooks_file(proj, hooks)
    settings = load_settings(proj)
    engine = ScriptedEngine(turns)
    session = Session.create(proj)
    agent = Agent(engine, offered_order(builtin_tools() + harness_tools()), session, ToolContext(cwd=proj),
                  system_prompt="You are a test agent.", permissions=Permissions(settings.permissions, mode, proj),
                  context=ContextBuilder(proj, proj, proj / "nohome", proj / "noclaude"), approver=headless_approver)
    config = {e: [{"matcher": g.matcher, "hooks": g.hooks, "source": g.source} for g in groups]
              for e, groups in settings.hooks.items()}
    notes = []
    agent.bus.subscribe(HookBridge(HookRunner(config, proj, session.session_id, str(session.transcript_path)), mode,
                                   notify=notes.append))
    attach_harness(agent, Harness.discover(proj))
    return agent, notes


def results(agent):
    return [m["content"] for m in agent.session.messages if m["role"] == "tool"]


def recorded(proj):
    path = proj / "events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_every_event_fires_in_order_with_the_exact_stdin_fields(proj, env, tmp_path):
    events = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SubagentStop", "SessionEnd"]
    hooks_file(proj, {e: hook(RECORD, "*" if e in ("PreToolUse", "PostToolUse") else None) for e in events})
    turns = [{"tool_calls": [call("Task", description="find code", prompt="Find the code.", subagent_type="Explore")]},
             {"tool_calls": [call("Read", file_path="notes.txt")]}, {"text": "4321"}, {"text": "The code is 4321."}]
    script = tmp_path / "s.json"
    script.write_text(json.dumps(turns))
    run = [sys.executable, "-m", "agent", "--engine", "scripted", "--script", str(script), "--output-format", "json"]
    r = subprocess.run(run + ["-p", "what is the code?"], cwd=proj, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    sid = json.loads(r.stdout)["session_id"]
    got = recorded(proj)
    assert [(e["hook_event_name"], e.get("tool_name")) for e in got] == [
        ("SessionStart", None), ("UserPromptSubmit", None), ("PreToolUse", "Task"), ("PreToolUse", "Read"),
        ("PostToolUse", "Read"), ("SubagentStop", None), ("PostToolUse", "Task"), ("Stop", None), ("SessionEnd", None)]
    for e in got:
        assert set(e) == COMMON | FIELDS[e["hook_event_name"]], e["hook_event_name"]
        assert (e["session_id"], e["cwd"], e["permission_mode"]) == (sid, str(proj), "default")
        assert Path(e["transcript_path"]).name == f"{sid}.jsonl"
    start, prompt, pre_task, pre_read, post_read, sub_stop, post_task, stop, end = got
    assert (start["source"], prompt["prompt"], stop["stop_hook_active"], end["reason"]) == \
        ("startup", "what is the code?", False, "exit")
    assert pre_task["tool_input"] == {"description": "find code", "prompt": "Find the code.", "subagent_type": "Explore"}
    assert (pre_read["tool_input"], post_read["tool_use_id"]) == ({"file_path": "notes.txt"}, pre_read["tool_use_id"])
    assert "4321" in post_read["tool_response"]["content"] and post_read["tool_response"]["is_error"] is False
    child = Path(sub_stop["agent_transcript_path"])
    assert (sub_stop["stop_hook_active"], child.name, child.parent.parent.name) == \
        (False, f"{sub_stop['agent_id']}.jsonl", sid)
    assert post_task["tool_response"]["content"] == "4321"
    (proj / "events.jsonl").unlink()
    script.write_text(json.dumps([{"text": "again"}]))
    r = subprocess.run(run + ["--continue", "-p", "more"], cwd=proj, env=env, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 0 and [e.get("source") for e in recorded(proj)][0] == "resume"


def test_pre_compact_and_notification_payloads(proj):
    agent, _ = make_agent(proj, [], {"PreCompact": hook(RECORD, "manual"), "Notification": hook(RECORD)})
    agent.emit(ev.PreCompact(trigger="auto", custom_instructions=""))  # the matcher selects the trigger
    agent.emit(ev.PreCompact(trigger="manual", custom_instructions="keep the test names"))
    agent.emit(ev.Notification(message="The agent needs your permission to use Bash"))
    got = recorded(proj)
    assert [{k: e[k] for k in FIELDS[e["hook_event_name"]] | {"hook_event_name"}} for e in got] == [
        {"hook_event_name": "PreCompact", "trigger": "manual", "custom_instructions": "keep the test names"},
        {"hook_event_name": "Notification", "message": "The agent needs your permission to use Bash",
         "notification_type": "permission_prompt"}]


def test_a_permission_prompt_and_a_plan_approval_notify(proj):
    hooks_file(proj, {"Notification": hook(RECORD)})
    turns = [{"tool_calls": [call("Bash", command="touch made")]}, {"text": "ok"},
             {"tool_calls": [call("ExitPlanMode", plan="1. do it")]}, {"text": "planned"}]
    c = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine(turns))
    c.ask = lambda req: PermissionAnswer("deny")
    c.run("make a file", threading.Event())
    c.set_mode("plan")
    c.run("plan it", threading.Event())
    assert [e["message"] for e in recorded(proj)] == ["The agent needs your permission to use Bash",
                                                      "The agent needs your approval for its plan"]


@pytest.mark.parametrize("mode", ["default", "bypassPermissions"])
def test_a_blocking_hook_holds_in_every_mode(proj, mode):
    hooks = {"PreToolUse": hook("echo 'no shell today' >&2; exit 2", "Bash") + hook(
        "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"deny\", "
        "\"permissionDecisionReason\": \"writes are frozen\"}}'", "Write|Edit")}
    agent, notes = make_agent(proj, [{"tool_calls": [call("Bash", command="touch made"),
                                                     call("Write", file_path="w.txt", content="x")]},
                                     {"text": "ok"}], hooks, mode=mode)
    agent.run("go")
    assert results(agent) == ["Error: a PreToolUse hook blocked this Bash call: no shell today",
                              "Error: a PreToolUse hook blocked this Write call: writes are frozen"]
    assert not (proj / "made").exists() and not (proj / "w.txt").exists() and notes == []


def test_a_hook_rewrites_the_input_and_adds_context(proj):
    rewrite = ("echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"allow\","
               " \"updatedInput\": {\"command\": \"touch rewritten\"}}}'")
    hooks = {"PreToolUse": hook(rewrite, "Bash"),
             "PostToolUse": hook("echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolUse\", "
                                 "\"additionalContext\": \"Formatted by the hook.\"}}'", "Bash"),
             "UserPromptSubmit": hook("echo 'The repo uses tabs.'")}
    agent, notes = make_agent(proj, [{"tool_calls": [call("Bash", command="touch original")]}, {"text": "ok"}], hooks)
    agent.run("make a file")
    assert (proj / "rewritten").exists() and not (proj / "original").exists() and notes == []
    calls = agent.session.messages[2]["tool_calls"]
    assert calls[0]["function"]["arguments"] == {"command": "touch original"}  # the history keeps what the model said
    assert results(agent)[0].endswith("\n\nFormatted by the hook.") and "exit code 0" in results(agent)[0]
    assert agent.session.messages[1]["content"].endswith("<context>\nThe repo uses tabs.\n</context>\n\nmake a file")


def test_timeouts_crashes_and_bad_output_are_reported_and_never_block(proj):
    hooks = {"PreToolUse": hook("sleep 30", "Bash", timeout=1) + hook("echo boom >&2; exit 1", "Bash")
             + hook("echo '{not json'", "Bash")}
    agent, notes = make_agent(proj, [{"tool_calls": [call("Bash", command="touch made")]}, {"text": "ok"}], hooks,
                              mode="bypassPermissions")
    t0 = time.monotonic()
    assert agent.run("go").text == "ok"
    assert time.monotonic() - t0 < 10 and (proj / "made").exists()
    assert sorted(notes) == sorted([
        "PreToolUse hook `sleep 30`: timed out after 1s (killed)",
        "PreToolUse hook `echo boom >&2; exit 1`: exit 1: boom",
        "PreToolUse hook `echo '{not json'`: invalid JSON output (Expecting property name enclosed in double quotes "
        "at line 1 column 2)"])


def test_the_stop_hook_loop_is_bounded(proj):
    hooks = {"Stop": hook(RECORD + "; echo 'run the tests first' >&2; exit 2")}
    agent, _ = make_agent(proj, [{"text": f"done {i}"} for i in range(6)], hooks)
    result = agent.run("go")
    assert (result.stop_reason, result.text, result.num_turns) == ("end_turn", "done 3", 4)
    assert [e["stop_hook_active"] for e in recorded(proj)] == [False, True, True, True]
    feedback = [m["content"] for m in agent.session.messages if m["role"] == "user"][1:]
    assert feedback == ["Stop hook feedback:\nrun the tests first"] * 3


def test_subagent_stop_can_send_a_child_back_and_hooks_guard_children(proj):
    hooks = {"SubagentStop": hook('test -f sub.flag || { touch sub.flag; echo "cite line numbers" >&2; exit 2; }'),
             "Stop": hook(RECORD),
             "PreToolUse": hook("echo 'no reading in subagents today' >&2; exit 2", "Read")}
    turns = [{"tool_calls": [call("Task", description="d", prompt="Find the code.", subagent_type="Explore")]},
             {"tool_calls": [call("Read", file_path="notes.txt")]}, {"text": "no idea"},
             {"text": "still no idea (no line numbers: Read was blocked)"}, {"text": "done"}]
    agent, _ = make_agent(proj, turns, hooks)
    agent.run("go")
    assert results(agent) == ["still no idea (no line numbers: Read was blocked)"]
    child = agent.ctx.services["task"].__self__.children[0]
    lines = [json.loads(x) for x in Path(child["transcript_path"]).read_text().splitlines()]
    messages = [x["message"] for x in lines if x["type"] == "message"]
    assert messages[3]["content"] == "Error: a PreToolUse hook blocked this Read call: no reading in subagents today"
    assert messages[5] == {"role": "user", "content": "Stop hook feedback:\ncite line numbers"}
    assert len(recorded(proj)) == 1  # the parent's Stop only; a child's end is SubagentStop


def test_slash_hooks_lists_what_is_active_and_from_which_file(proj):
    from agent.ui.slash import SlashRegistry
    project_file = hooks_file(proj, {"PreToolUse": hook("./guard.sh", "Bash")})
    local_file = hooks_file(proj, {"Stop": hook("make test")}, "settings.local.json")
    c = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine([]))
    assert SlashRegistry(proj).run(c, "/hooks").text == "\n".join([
        "**Hooks**", f"- PreToolUse [Bash]: `./guard.sh` ({project_file})", f"- Stop: `make test` ({local_file})"])

"""Plan mode: the same tools offered, writes refused in the harness, ExitPlanMode headless and interactive."""
import json
import os
import subprocess
import threading
import sys
from pathlib import Path

import pytest

from agent.core.context import ContextBuilder
from agent.engines.scripted import ScriptedEngine
from agent.core.results import headless_approver
from agent.core.approval import PermissionAnswer
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from agent.core.loop import Agent
from agent.core.permissions import Permissions
from agent.harness.plan import NOT_IN_PLAN, PLAN_NOTE, PLAN_OFF_NOTE
from agent.core.transcript import Session
from agent.harness.harness import Harness, attach_harness
from agent.harness.tools import harness_tools, offered_order
from tools import builtin_tools
from tools.base import ToolContext

REPO = Path(__file__).resolve().parents[2]
PLAN = "1. Read calc.py\n2. Change `a - b` to `a + b` in add()\n3. Run the tests"


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
    (p / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return p


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def make_agent(proj, turns, mode):
    engine = ScriptedEngine(turns)
    agent = Agent(engine, offered_order(builtin_tools() + harness_tools()), Session.create(proj), ToolContext(cwd=proj),
                  system_prompt="You are a test agent.", permissions=Permissions(None, mode, proj),
                  context=ContextBuilder(proj, proj, proj / "nohome", proj / "noclaude"), approver=headless_approver)
    attach_harness(agent, Harness.discover(proj))
    return agent, engine


def results(agent):
    return [m["content"] for m in agent.session.messages if m["role"] == "tool"]


def test_plan_mode_offers_every_tool_refuses_writes_and_says_so_at_the_tail(proj):
    agent, engine = make_agent(proj, [
        {"tool_calls": [call("Write", file_path="new.txt", content="x"),
                        call("Edit", file_path="calc.py", old_string="a - b", new_string="a + b"),
                        call("Bash", command="touch made"), call("Read", file_path="calc.py")]},
        {"text": "Planned."}, {"text": "Now editing."}], "plan")
    assert agent.run("fix add").text == "Planned."
    assert not (proj / "new.txt").exists() and not (proj / "made").exists()
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
    refused = results(agent)[:3]
    for name, text in zip(("Write", "Edit", "Bash"), refused):
        assert text == (f"Error: permission to use {name} was denied: Plan mode is on, so {name} cannot run: only "
                        "read-only tools may. Finish researching, then call ExitPlanMode with your plan for the "
                        "user to approve.")
    assert "return a - b" in results(agent)[3]
    first_user = agent.session.messages[1]["content"]
    assert f"<context>\n{PLAN_NOTE}\n</context>\n\nfix add" in first_user
    agent.permissions.set_mode("default")
    agent.run("go ahead")
    assert agent.session.messages[-2]["content"] == f"<context>\n{PLAN_OFF_NOTE}\n</context>\n\ngo ahead"
    # The offered tools never changed, so the conversation's cached prefix survived the mode switch.
    assert engine.requests[0].tools == engine.requests[-1].tools
    assert [t["function"]["name"] for t in engine.requests[0].tools] == [
        "Read", "Grep", "Glob", "LS", "Write", "Edit", "MultiEdit", "Bash", "BashOutput", "KillShell", "TodoWrite", "WebFetch", "Task", "Skill", "ExitPlanMode"]
    before, after = engine.requests[-2], engine.requests[-1]
    assert after.messages[:len(before.messages)] == before.messages


def agent_cli(proj, env, tmp_path, turns, *args):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns))
    return subprocess.run([sys.executable, "-m", "agent", "-p", "fix add", "--engine", "scripted", "--script",
                           str(script), *args], cwd=proj, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


PLAN_TURNS = [{"tool_calls": [call("Read", file_path="calc.py")]},
              {"text": "Here is my plan.", "tool_calls": [call("ExitPlanMode", plan=PLAN)]},
              {"tool_calls": [call("Write", file_path="calc.py", content="oops")]}, {"text": "never"}]


def test_headless_exit_plan_mode_prints_the_plan_and_ends_the_run(proj, env, tmp_path):
    r = agent_cli(proj, env, tmp_path, PLAN_TURNS, "--permission-mode", "plan")
    assert (r.returncode, r.stdout, r.stderr) == (0, PLAN + "\n", "")
    r = agent_cli(proj, env, tmp_path, PLAN_TURNS, "--permission-mode", "plan", "--output-format", "stream-json")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["type"] for x in lines] == ["system", "assistant", "user", "assistant", "user", "result"]
    assert lines[0]["permissionMode"] == "plan"
    assert lines[4]["message"]["content"][0]["content"] == (
        "The plan is shown to the user. This is a non-interactive run, so it ends here; the user can continue "
        "the session outside plan mode to carry the plan out.")
    res = lines[-1]
    assert (res["subtype"], res["is_error"], res["result"], res["num_turns"], res["stop_reason"]) == \
        ("success", False, PLAN, 2, "end_turn")
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


def test_exit_plan_mode_outside_plan_mode_changes_nothing(proj, env, tmp_path):
    turns = [{"tool_calls": [call("ExitPlanMode", plan=PLAN)]}, {"text": "Carrying on."}]
    r = agent_cli(proj, env, tmp_path, turns, "--output-format", "stream-json")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert lines[2]["message"]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1",
                                                 "content": NOT_IN_PLAN, "is_error": False}
    assert lines[-1]["result"] == "Carrying on."


def interactive(proj, turns, answers):
    c = build_session(SessionOptions(project=proj, engine="scripted", permission_mode="plan"),
                    engine=ScriptedEngine(turns))
    asked = []
    feed = iter(answers)
    c.ask = lambda req: asked.append(req) or next(feed)
    return c, asked


def plan_then_write(content):
    return [{"tool_calls": [call("Read", file_path="calc.py")]},
            {"tool_calls": [call("ExitPlanMode", plan=PLAN)]},
            {"tool_calls": [call("Write", file_path="calc.py", content=content)]},
            {"text": "Done."}]


def test_interactive_approval_with_auto_accept_switches_to_accept_edits(proj):
    c, asked = interactive(proj, plan_then_write("def add(a, b):\n    return a + b\n"), [PermissionAnswer("always")])
    assert c.run("fix add", threading.Event()).text == "Done."
    assert c.mode == "acceptEdits" and c.permissions.mode == "acceptEdits"
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    (req,) = asked  # the Write ran without a prompt
    assert (req.tool_name, req.tool_input, req.rules, req.preview) == ("ExitPlanMode", {"plan": PLAN}, [], None)
    assert req.reason == (f"The agent's plan:\n\n{PLAN}\n\nApprove it to leave plan mode (edits will ask first), "
                          "or say what to change.")
    approved = [m["content"] for m in c.session.messages if m["role"] == "tool"][1]
    assert approved == "The user approved the plan. Plan mode is off (mode: acceptEdits); carry out the plan now."


def test_interactive_approval_once_switches_to_default_where_edits_ask(proj):
    c, asked = interactive(proj, plan_then_write("x = 1\n"), [PermissionAnswer("once"), PermissionAnswer("once")])
    c.run("fix add", threading.Event())
    assert c.mode == "default" and [r.tool_name for r in asked] == ["ExitPlanMode", "Write"]
    assert (proj / "calc.py").read_text() == "x = 1\n"


def test_interactive_rejection_keeps_plan_mode_and_passes_feedback(proj):
    c, asked = interactive(proj, plan_then_write("x = 1\n"), [PermissionAnswer("deny", "also add a test")])
    c.run("fix add", threading.Event())
    assert c.mode == "plan" and len(asked) == 1
    tool = [m["content"] for m in c.session.messages if m["role"] == "tool"]
    assert tool[1] == ("The user did not approve the plan; plan mode is still on. The user says: also add a test "
                       "Revise the plan and call ExitPlanMode again.")
    assert tool[2].startswith("Error: permission to use Write was denied: Plan mode is on")
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"


def test_exit_plan_mode_has_no_property_description_to_copy_and_refuses_its_own_description(proj):
    from agent.harness.tools import ExitPlanModeTool
    assert ExitPlanModeTool.input_schema["properties"] == {"plan": {"type": "string"}}
    agent, _ = make_agent(proj, [{"tool_calls": [call("ExitPlanMode", plan=ExitPlanModeTool.description)]},
                                 {"tool_calls": [call("ExitPlanMode", plan=PLAN)]}], "plan")
    result = agent.run("plan the fix")
    first, second = results(agent)
    assert first.startswith("Error: that is this tool's description, not a plan.")
    assert (result.stop_reason, result.text) == ("end_turn", PLAN)  # the real plan then ends the headless run

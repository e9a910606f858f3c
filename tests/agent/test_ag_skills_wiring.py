"""Skills and custom commands wired into the loop: the index, the Skill tool, allowed-tools, `/name args`."""
import json
import os
import subprocess
import sys
import threading
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
from agent.core.transcript import Session
from agent.harness.harness import Harness, attach_harness
from agent.harness.tools import harness_tools, offered_order
from hooks.settings import PermissionSettings, SourcedRule
from tools import builtin_tools
from tools.base import ToolContext

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "You are a test agent."


@pytest.fixture
def env(tmp_path, monkeypatch):
    values = {"AGENT_DATA_DIR": tmp_path / "data", "HOME": tmp_path / "home", "AGENT_HOME": tmp_path / "agenthome",
              "CLAUDE_CONFIG_DIR": tmp_path / "claude"}
    for name, value in values.items():
        monkeypatch.setenv(name, str(value))
    return {**os.environ, "PYTHONPATH": str(REPO)}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def proj(tmp_path, env):
    p = tmp_path / "proj"
    write(p / ".agent" / "skills" / "deploy" / "SKILL.md",
          "---\nname: deploy\ndescription: Ship the app. Use when asked to deploy.\n---\nDeploy to $ARGUMENTS now.\n")
    write(p / ".claude" / "skills" / "toucher" / "SKILL.md",
          "---\ndescription: Make marker files.\nallowed-tools: Bash(touch:*)\n---\nTouch the markers.\n")
    write(p / ".agents" / "skills" / "secret" / "SKILL.md",
          "---\ndescription: Only for people.\ndisable-model-invocation: true\n---\nHuman stuff.\n")
    write(tmp_path / "agenthome" / "skills" / "lint" / "SKILL.md", "---\ndescription: Lint the code.\n---\nRun ruff.\n")
    return p


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def make_agent(proj, turns, *, mode="default", deny=()):
    engine = ScriptedEngine(turns)
    settings = PermissionSettings(deny=[SourcedRule(r, "test") for r in deny])
    agent = Agent(engine, offered_order(builtin_tools() + harness_tools()), Session.create(proj), ToolContext(cwd=proj),
                  system_prompt=SYSTEM, permissions=Permissions(settings, mode, proj),
                  context=ContextBuilder(proj, proj, proj / "nohome", proj / "noclaude"), approver=headless_approver)
    harness = Harness.discover(proj)
    attach_harness(agent, harness)
    return agent, engine, harness


def results(agent):
    return [m["content"] for m in agent.session.messages if m["role"] == "tool"]


def test_the_index_is_in_the_first_user_message_never_in_the_prefix(proj):
    agent, engine, harness = make_agent(proj, [{"text": "hi"}, {"text": "again"}])
    agent.run("hello")
    agent.run("more")
    first = agent.session.messages[1]["content"]
    index = first.split("<skills>\n")[1].split("\n</skills>")[0].splitlines()
    assert index[0] == "Skills you can load with the Skill tool when a task matches:"
    assert [line.split(":")[0] for line in index[1:]] == [
        "- commit", "- deploy", "- fix-tests", "- lint", "- review", "- toucher"]  # not `secret`
    assert "- deploy: Ship the app. Use when asked to deploy." in index
    agents = first.split("<agents>\n")[1].split("\n</agents>")[0].splitlines()
    assert [a.split(":")[0] for a in agents[1:]] == ["- general-purpose", "- Explore", "- Plan"]
    assert first.index("<skills>") < first.index("<agents>") < first.index("<env>") and first.endswith("\n\nhello")
    prefix = json.dumps(engine.requests[-1].tools) + agent.session.messages[0]["content"]
    assert agent.session.messages[0]["content"] == SYSTEM and "deploy" not in prefix and "toucher" not in prefix
    assert agent.session.messages[3]["content"] == "more"  # shown once


def test_a_small_model_sees_only_the_users_and_projects_own_index_entries(proj):
    harness = Harness.discover(proj)
    small = harness.index_text(builtins=False)
    assert [ln.split(":")[0] for ln in small.splitlines() if ln.startswith("- ")] == ["- deploy", "- lint", "- toucher"]
    assert "<agents>" not in small  # only the built-in general-purpose, Explore and Plan exist here
    write(proj / ".claude" / "agents" / "tester.md", "---\nname: tester\ndescription: Runs tests.\n---\nRun them.\n")
    assert "- tester" in Harness.discover(proj).index_text(builtins=False)
    assert "- general-purpose" not in Harness.discover(proj).index_text(builtins=False)
    assert Harness(proj).index_text(builtins=False) == ""


def test_the_skill_tool_loads_the_body_as_the_tool_result(proj):
    agent, _, _ = make_agent(proj, [
        {"tool_calls": [call("Skill", skill="deploy", args="staging"), call("Skill", skill="nope"),
                        call("Skill", skill="secret")]}, {"text": "ok"}])
    agent.run("ship it")
    skill_dir = proj / ".agent" / "skills" / "deploy"
    available = "commit, deploy, fix-tests, lint, review, toucher"
    assert results(agent) == [
        f"Base directory for this skill: {skill_dir}\n\nDeploy to staging now.\n",
        f"Error: skill 'nope' does not exist. Available skills: {available}.",
        f"Error: skill 'secret' can only be run by the user (as /name). Available skills: {available}."]
    assert agent.session.messages[-3]["role"] == "tool"  # the body sits at the tail, after the call


def test_allowed_tools_hold_for_the_rest_of_that_run_only(proj):
    agent, _, _ = make_agent(proj, [
        {"tool_calls": [call("Bash", command="touch a")]},
        {"tool_calls": [call("Skill", skill="toucher")]},
        {"tool_calls": [call("Bash", command="touch b"), call("Bash", command="touch d"),
                        call("Bash", command="rm -f x")]},
        {"text": "made b"},
        {"tool_calls": [call("Bash", command="touch c")]}, {"text": "no c"}], deny=["Bash(touch d)"])
    agent.run("make markers")
    assert [(proj / n).exists() for n in "abd"] == [False, True, False]
    out = results(agent)
    assert out[0].startswith("Error: permission to use Bash was denied: it needs the user's approval")
    assert out[3] == "Error: permission to use Bash was denied: Denied by rule Bash(touch d) (test): `touch d`."
    assert out[4].startswith("Error: permission to use Bash was denied: it needs the user's approval")
    agent.run("one more")
    assert not (proj / "c").exists() and results(agent)[-1].startswith(
        "Error: permission to use Bash was denied: it needs the user's approval")
    assert [r.text for r in agent.permissions.rules["allow"]] == []


def test_allowed_tools_do_not_lift_plan_mode(proj):
    agent, _, _ = make_agent(proj, [{"tool_calls": [call("Skill", skill="toucher")]},
                                    {"tool_calls": [call("Bash", command="touch b")]}, {"text": "ok"}], mode="plan")
    agent.run("make markers")
    assert not (proj / "b").exists() and "Plan mode is on" in results(agent)[1]


def run_cli(proj, env, tmp_path, prompt, turns):
    script = write(tmp_path / "script.json", json.dumps(turns))
    return subprocess.run([sys.executable, "-m", "agent", "-p", prompt, "--engine", "scripted", "--script",
                           str(script), "--output-format", "json"], cwd=proj, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def first_user_prompt(tmp_path, result):
    sid = json.loads(result.stdout)["session_id"]
    (path,) = (tmp_path / "data" / "projects").glob(f"*/{sid}.jsonl")
    users = [json.loads(x)["message"]["content"] for x in path.read_text().splitlines()
             if json.loads(x)["type"] == "message" and json.loads(x)["message"]["role"] == "user"]
    return users[0].rsplit("</env>\n\n", 1)[1]


def test_headless_slash_commands_and_skills_with_arguments(proj, env, tmp_path):
    write(proj / ".claude" / "commands" / "mk.md",
          "---\ndescription: Make two files\nallowed-tools: Bash(touch:*)\n---\nCreate $1, then $2. All: $ARGUMENTS\n")
    write(tmp_path / "agenthome" / "commands" / "git" / "hi.md", "Say hi to $ARGUMENTS.\n")
    r = run_cli(proj, env, tmp_path, "/mk one.txt two.txt",
                [{"tool_calls": [call("Bash", command="touch one.txt two.txt")]}, {"text": "made"}])
    assert (r.returncode, r.stderr, json.loads(r.stdout)["result"]) == (0, "", "made")
    assert first_user_prompt(tmp_path, r) == "Create one.txt, then two.txt. All: one.txt two.txt"
    assert (proj / "one.txt").exists() and (proj / "two.txt").exists()  # the command's allowed-tools held
    r = run_cli(proj, env, tmp_path, "/git:hi the team", [{"text": "hi"}])
    assert first_user_prompt(tmp_path, r) == "Say hi to the team.\n"
    r = run_cli(proj, env, tmp_path, "/deploy prod", [{"text": "deployed"}])
    assert first_user_prompt(tmp_path, r) == (f"Base directory for this skill: {proj / '.agent' / 'skills' / 'deploy'}"
                                              "\n\nDeploy to prod now.\n")
    r = run_cli(proj, env, tmp_path, "/usr/bin/env is broken", [{"text": "ok"}])
    assert first_user_prompt(tmp_path, r) == "/usr/bin/env is broken"


def test_bad_frontmatter_is_a_warning_naming_the_file_and_the_rest_load(proj, env, tmp_path):
    bad = write(proj / ".agent" / "skills" / "broken" / "SKILL.md", "---\ndescription: ok\nallowed-tools: [Read\n---\nbody\n")
    bad_cmd = write(proj / ".agent" / "commands" / "half.md", "---\ndescription: never closed\nbody\n")
    r = run_cli(proj, env, tmp_path, "/deploy prod", [{"text": "deployed"}])
    assert r.returncode == 0 and json.loads(r.stdout)["result"] == "deployed"
    assert r.stderr.splitlines() == [
        f"agent: skill skipped: {bad}: invalid YAML frontmatter at line 3: expected ',' or ']', but got '<stream end>'",
        f"agent: command skipped: {bad_cmd}: frontmatter is not closed (no second '---' line)"]
    assert first_user_prompt(tmp_path, r).endswith("Deploy to prod now.\n")


def test_interactive_slash_skill_arms_its_allowed_tools_for_that_prompt(proj):
    from agent.ui.slash import SlashRegistry
    turns = [{"tool_calls": [call("Bash", command="touch b")]}, {"text": "made"},
             {"tool_calls": [call("Bash", command="touch c")]}, {"text": "asked"}]
    c = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine(turns))
    asked = []
    c.ask = lambda req: asked.append(req.tool_name) or PermissionAnswer("deny")
    slash = SlashRegistry(proj).run(c, "/toucher now")
    assert slash.prompt == f"Base directory for this skill: {proj / '.claude' / 'skills' / 'toucher'}\n\n" \
                           "Touch the markers.\n\nARGUMENTS: now\n"
    c.run(slash.prompt, threading.Event())
    assert (proj / "b").exists() and asked == []
    c.run("again", threading.Event())
    assert not (proj / "c").exists() and asked == ["Bash"]

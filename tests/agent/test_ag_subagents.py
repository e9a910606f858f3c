"""Subagents through the real loop: the Task tool, fresh child contexts, narrowed permissions, limits, KV fork."""
import json
import time
from pathlib import Path

import pytest

from agent.core.context import ContextBuilder
from agent.engines.scripted import ScriptedEngine
from agent.core.results import headless_approver
from agent.core.loop import Agent, Approval, LoopConfig
from agent.core.permissions import Permissions
from agent.harness.plan import CHILD_PLAN_NOTE
from agent.core.transcript import Session
from agent.harness.harness import Harness, attach_harness
from agent.harness.tools import harness_tools, offered_order
from agent.harness.subagents import ChildPermissions, SubagentConfig, _Slots, narrower_mode
from runtime.api import Sampling
from tools import builtin_tools
from tools.base import ToolContext

SYSTEM = "You are a test agent."


@pytest.fixture
def proj(tmp_path, monkeypatch):
    for name, sub in (("AGENT_DATA_DIR", "data"), ("HOME", "home"), ("AGENT_HOME", "agenthome"),
                      ("CLAUDE_CONFIG_DIR", "claude")):
        monkeypatch.setenv(name, str(tmp_path / sub))
    p = tmp_path / "proj"
    p.mkdir()
    (p / "notes.txt").write_text("The launch code is 4321.\n")
    return p


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def task(prompt, subagent_type="Explore", description="look around", **extra):
    return call("Task", description=description, prompt=prompt, subagent_type=subagent_type, **extra)


def make_agent(proj, turns=(), *, engine=None, mode="default", approver=headless_approver, config=None,
               subagents=None, context=False, tools=None):
    engine = engine or ScriptedEngine(list(turns))
    ctx_builder = ContextBuilder(proj, proj, proj / "nohome", proj / "noclaude") if context else None
    agent = Agent(engine, tools or offered_order(builtin_tools() + harness_tools()), Session.create(proj),
                  ToolContext(cwd=proj),
                  system_prompt=SYSTEM, context=ctx_builder, permissions=Permissions(None, mode, proj),
                  approver=approver, config=config)
    harness = Harness.discover(proj, subagents=subagents)
    attach_harness(agent, harness)
    return agent, engine


def runner(agent):
    return agent.ctx.services["task"].__self__


def tool_results(agent):
    return [m["content"] for m in agent.session.messages if m["role"] == "tool"]


def transcript(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines()]


def test_explore_child_gets_a_fresh_context_and_only_its_report_returns(proj):
    agent, engine = make_agent(proj, [
        {"text": "Delegating.", "tool_calls": [task("Find the launch code.")]},
        {"tool_calls": [call("Read", file_path="notes.txt")]},  # the child
        {"text": "The code is 4321 (notes.txt:1)."},  # the child's report
        {"text": "It is 4321."}])
    result = agent.run("what is the launch code?")
    assert (result.stop_reason, result.text) == ("end_turn", "It is 4321.")
    assert tool_results(agent) == ["The code is 4321 (notes.txt:1)."]
    # The parent's history holds its own four messages and nothing of the child's.
    assert [m["role"] for m in agent.session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    (report,) = runner(agent).children
    child_id = report["session_id"]
    assert [r.session_id for r in engine.requests] == [agent.session.session_id, child_id, child_id,
                                                       agent.session.session_id]
    first = engine.requests[1]
    assert [t["function"]["name"] for t in first.tools] == ["Read", "Grep", "Glob", "LS"]
    explore = next(a for a in runner(agent).harness.agents if a.name == "Explore")
    assert first.messages == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": (
        f'<subagent type="Explore">\n{explore.system_prompt}\n</subagent>\n\nFind the launch code.')}]
    # The child's transcript sits beside the parent's, with a meta line naming the parent.
    path = agent.session.transcript_path.with_suffix("") / "subagents" / f"{child_id}.jsonl"
    assert report["transcript_path"] == str(path) and report["stop_reason"] == "end_turn"
    lines = transcript(path)
    meta = lines[0]
    assert {k: meta[k] for k in ("type", "session_id", "parent_session_id", "subagent_type", "description",
                                 "depth")} == {"type": "meta", "session_id": child_id,
                                               "parent_session_id": agent.session.session_id,
                                               "subagent_type": "Explore", "description": "look around", "depth": 1}
    messages = [x["message"] for x in lines if x["type"] == "message"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert "The launch code is 4321." in messages[3]["content"]
    assert lines[-1]["type"] == "result" and lines[-1]["result"] == "The code is 4321 (notes.txt:1)."
    assert list((proj.parent / "data" / "projects").glob("*/*.jsonl")) == [agent.session.transcript_path]


def test_unknown_type_and_empty_prompt_are_errors_the_model_can_fix(proj):
    agent, _ = make_agent(proj, [{"tool_calls": [task("x", "Wizard"), task("  ", "Plan")]}, {"text": "ok"}])
    agent.run("go")
    assert tool_results(agent) == [
        "Error: there is no subagent type 'Wizard'. Available: general-purpose, Explore, Plan.",
        "Error: the prompt is empty; say what the subagent should do."]


def test_custom_definition_from_claude_agents_with_a_tool_allowlist(proj):
    d = proj / ".claude" / "agents"
    d.mkdir(parents=True)
    (d / "reader.md").write_text("---\nname: reader\ndescription: Reads files.\ntools: Read\n---\nOnly read.\n")
    agent, engine = make_agent(proj, [
        {"tool_calls": [task("cat notes", "reader")]},
        {"tool_calls": [call("Bash", command="cat notes.txt"), call("Read", file_path="notes.txt")]},
        {"text": "4321"}, {"text": "done"}])
    agent.run("go")
    assert [t["function"]["name"] for t in engine.requests[1].tools] == ["Read"]
    assert engine.requests[1].messages[1]["content"] == '<subagent type="reader">\nOnly read.\n</subagent>\n\ncat notes'
    child = transcript(runner(agent).children[0]["transcript_path"])
    results = [x["message"]["content"] for x in child if x["type"] == "message" and x["message"]["role"] == "tool"]
    assert results[0] == "Error: there is no tool named 'Bash'. Available tools: Read."
    assert "4321" in results[1]
    assert tool_results(agent) == ["4321"]


def test_a_child_of_a_plan_mode_parent_cannot_write(proj):
    agent, _ = make_agent(proj, [
        {"tool_calls": [task("write x", "general-purpose")]},
        {"tool_calls": [call("Write", file_path="x.txt", content="x"), call("Bash", command="touch y"),
                        call("ExitPlanMode", plan="1. write x")]},
        {"text": "I could not write."}, {"text": "ok"}], mode="plan")
    agent.run("go")
    assert not (proj / "x.txt").exists() and not (proj / "y").exists()
    child = transcript(runner(agent).children[0]["transcript_path"])
    results = [x["message"]["content"] for x in child if x["type"] == "message" and x["message"]["role"] == "tool"]
    assert results[0].startswith("Error: permission to use Write was denied: Plan mode is on, so Write cannot run")
    assert results[1].startswith("Error: permission to use Bash was denied: Plan mode is on, so Bash cannot run")
    assert results[2] == ("Error: a subagent cannot leave plan mode or ask the user to approve a plan. Put the "
                          "plan in your final reply; the main agent presents it.")
    assert agent.permissions.mode == "plan"
    first_prompt = next(x["message"]["content"] for x in child if x["type"] == "message" and x["message"]["role"] == "user")
    assert first_prompt.startswith(CHILD_PLAN_NOTE + "\n\n<subagent type=\"general-purpose\">")


def test_a_definition_cannot_raise_its_mode_and_approvals_go_to_the_parents_approver(proj):
    d = proj / ".agent" / "agents"
    d.mkdir(parents=True)
    (d / "yolo.md").write_text("---\ndescription: Does anything.\npermissionMode: bypassPermissions\n---\nGo.\n")
    (d / "careful.md").write_text("---\ndescription: Plans only.\npermissionMode: plan\n---\nPlan.\n")
    asked = []

    def approver(name, args, reason):
        asked.append((name, args))
        return Approval(False, "the user said no")

    agent, _ = make_agent(proj, [
        {"tool_calls": [task("make y", "yolo", mode="bypassPermissions")]},
        {"tool_calls": [call("Bash", command="touch y")]}, {"text": "refused"},
        {"tool_calls": [task("make z", "careful")]},
        {"tool_calls": [call("Bash", command="touch z")]}, {"text": "refused too"},
        {"text": "ok"}], approver=approver, mode="acceptEdits")
    agent.run("go")
    assert not (proj / "y").exists() and not (proj / "z").exists()
    assert asked == [("Bash", {"command": "touch y"})]  # plan mode refuses without asking
    first, second = (transcript(c["transcript_path"]) for c in runner(agent).children)
    tool = [x["message"]["content"] for x in first if x["type"] == "message" and x["message"]["role"] == "tool"]
    assert tool == ["Error: permission to use Bash was denied: the user said no"]
    tool = [x["message"]["content"] for x in second if x["type"] == "message" and x["message"]["role"] == "tool"]
    assert tool[0].startswith("Error: permission to use Bash was denied: Plan mode is on")


def test_child_permissions_follow_the_parent_live_and_never_widen(proj):
    parent = Permissions(None, "default", proj)
    child = ChildPermissions(parent, frozenset({"Read", "Write"}), "bypassPermissions")
    assert child.mode == "default"
    assert child.check("Bash", {"command": "ls"}, False).behavior == "deny"
    assert child.check("Write", {"file_path": "a.txt", "content": ""}, False).behavior == "ask"
    parent.add_rule("Write", "allow", "session")  # rules the parent gains later reach the child
    assert child.check("Write", {"file_path": "a.txt", "content": ""}, False).behavior == "allow"
    child.add_rule("Read(//etc/**)", "allow", "allowed-tools: skill x")  # a child's grant stays in the child
    assert [r.text for r in parent.rules["allow"]] == ["Write"]
    parent.set_mode("plan")
    assert child.mode == "plan" and child.check("Write", {"file_path": "a.txt", "content": ""}, False).behavior == "deny"
    grandchild = ChildPermissions(child, frozenset({"Read"}))
    assert grandchild.mode == "plan" and grandchild.check("Read", {"file_path": "/etc/hostname"}, True).behavior == "allow"
    assert [narrower_mode(p, r) for p, r in [("plan", "bypassPermissions"), ("default", "plan"),
                                             ("bypassPermissions", "acceptEdits"), ("default", "nonsense")]] == \
        ["plan", "plan", "acceptEdits", "default"]


def test_depth_limit(proj):
    grandchild_task = task("go deeper", "general-purpose")
    turns = [{"tool_calls": [task("level 1", "general-purpose")]},
             {"tool_calls": [grandchild_task]},  # child (depth 1) starts a grandchild
             {"tool_calls": [task("level 3", "general-purpose")]},  # grandchild (depth 2) is refused one
             {"text": "gc done"}, {"text": "child done"}, {"text": "parent done"}]
    agent, _ = make_agent(proj, turns)
    assert agent.run("go").text == "parent done"
    inner = runner(agent).children[0]
    (gc_path,) = Path(inner["transcript_path"]).with_suffix("").glob("subagents/*.jsonl")
    gc_lines = transcript(gc_path)
    gc_results = [x["message"]["content"] for x in gc_lines if x["type"] == "message" and x["message"]["role"] == "tool"]
    assert gc_results == ["Error: subagents cannot be nested more than 2 deep; do this part yourself."]
    assert tool_results(agent) == ["child done"]

    agent, _ = make_agent(proj, [{"tool_calls": [task("level 1", "general-purpose")]},
                                 {"tool_calls": [grandchild_task]}, {"text": "child done"}, {"text": "ok"}],
                          subagents=SubagentConfig(max_depth=1))
    agent.run("go")
    child = transcript(runner(agent).children[0]["transcript_path"])
    assert [x["message"]["content"] for x in child if x["type"] == "message" and x["message"]["role"] == "tool"] == \
        ["Error: subagents cannot be nested more than 1 deep; do this part yourself."]


def overlap(children):
    events = sorted([(c["started"], 1) for c in children] + [(c["finished"], -1) for c in children])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@pytest.mark.parametrize("limit,expected", [(2, 2), (4, 3)])
def test_concurrency_limit(proj, limit, expected):
    turns = [{"tool_calls": [task(f"job {i}") for i in range(3)]}] + [{"text": "report"}] * 3 + [{"text": "ok"}]
    engine = ScriptedEngine(turns, delay_s=0.1)
    agent, _ = make_agent(proj, engine=engine, subagents=SubagentConfig(max_concurrent=limit))
    assert agent.run("go").text == "ok"
    assert tool_results(agent) == ["report"] * 3
    assert overlap(runner(agent).children) == expected


def test_slots_refuse_instead_of_waiting_when_asked_not_to_wait():
    import threading
    slots, cancel = _Slots(1), threading.Event()
    assert slots.acquire(False, cancel) and not slots.acquire(False, cancel)
    cancel.set()
    assert not slots.acquire(True, cancel)  # a cancelled wait gives up
    slots.release()
    assert slots.acquire(True, threading.Event())


def test_subagent_config_from_env():
    assert SubagentConfig.from_env({"AGENT_SUBAGENT_MAX_DEPTH": "1", "AGENT_SUBAGENT_MAX_CONCURRENT": "8"}) == \
        SubagentConfig(max_depth=1, max_concurrent=8)
    with pytest.raises(ValueError, match="AGENT_SUBAGENT_MAX_CONCURRENT must be an integer >= 1, got '0'"):
        SubagentConfig.from_env({"AGENT_SUBAGENT_MAX_CONCURRENT": "0"})


def test_a_failing_child_reports_why(proj):
    agent, _ = make_agent(proj, [{"tool_calls": [task("loop", "general-purpose")]},
                                 {"text": "half", "tool_calls": [call("LS", path=".")]},
                                 {"tool_calls": [call("LS", path="..")]}, {"text": "ok"}],
                          config=LoopConfig(max_turns=2))
    agent.run("go")
    assert tool_results(agent) == ["Error: the general-purpose subagent stopped early (max_turns: stopped after 2 "
                                   "turns (--max-turns)). Its last message: half"]


def kv_agent(proj, engine, **kw):
    return make_agent(proj, engine=engine, config=LoopConfig(max_turns=1, sampling=Sampling(max_tokens=3)), **kw)


def check_fork(agent, engine, subagent_type):
    out = agent.ctx.services["task"]("measure", "Say hi.", subagent_type)
    report = out.data
    child = Session.load(Path(report["transcript_path"]))
    names = {"Explore": ["Read", "Grep", "Glob", "LS"]}.get(subagent_type)  # its allowlist
    tools = [s for s in agent.schemas if names is None or s["function"]["name"] in names]
    child_prompt = engine.builder.render_tokens(child.messages[:2], tools, True)
    parent = engine.session_tokens(agent.session.session_id)
    shared = next(i for i, (a, b) in enumerate(zip(parent, child_prompt)) if a != b)
    first = report["first_call"]
    assert report["kv_forked_tokens"] == shared == first["reused_tokens"] > 0
    assert first["prompt_tokens"] == len(child_prompt) and first["prefilled_tokens"] == len(child_prompt) - shared
    return first


def test_the_local_engine_starts_a_child_from_the_parents_cached_prefix(proj, make_tiny_gguf, tmp_path):
    from runtime.engine import LocalEngine
    from tools.ls import LSTool
    from tools.read import ReadTool
    from agent.harness.tools import TaskTool
    # A byte-level vocabulary loads in a second; few tools keep the prompt inside its 4096-token window.
    engine = LocalEngine.from_spec(str(make_tiny_gguf(tmp_path / "tiny.gguf", vocab="bytes")),
                                   cache_dir=tmp_path / "cache")
    agent, _ = kv_agent(proj, engine, tools=[ReadTool(), LSTool(), TaskTool()])
    agent.run("Hello there.")
    general = check_fork(agent, engine, "general-purpose")
    explore = check_fork(agent, engine, "Explore")
    assert general["reused_tokens"] > explore["reused_tokens"]  # all tools shared vs all but Task
    assert set(engine._sessions) == {agent.session.session_id}  # children's KV is dropped when they finish


@pytest.mark.slow
def test_measure_child_prefix_reuse_on_the_real_model(proj, small_gguf_path, capsys):
    from runtime.engine import LocalEngine
    engine = LocalEngine.from_spec(None)
    agent, _ = kv_agent(proj, engine, context=True)
    t0 = time.monotonic()
    agent.run("Hello there.")
    parent_s = time.monotonic() - t0
    rows = []
    for kind in ("general-purpose", "Explore"):
        t0 = time.monotonic()
        first = check_fork(agent, engine, kind)
        rows.append(f"{kind}: prompt {first['prompt_tokens']}, reused {first['reused_tokens']}, "
                    f"prefilled {first['prefilled_tokens']} ({time.monotonic() - t0:.1f}s)")
    with capsys.disabled():
        print(f"\nparent first call {parent_s:.1f}s; " + "; ".join(rows))


def test_task_descriptions_are_safe_to_copy_and_a_copied_prompt_starts_no_child(proj):
    from agent.harness.tools import TaskTool
    schema = TaskTool.input_schema
    # FORMATS.md fields unchanged; the tool description is one short name-like phrase, no sentences.
    assert (list(schema["properties"]), schema["required"]) == (["description", "prompt", "subagent_type"],) * 2
    assert len(TaskTool.description.split()) <= 8 and "." not in TaskTool.description
    agent, engine = make_agent(proj, [
        {"tool_calls": [task("Find the launch code.", description=TaskTool.description)]},
        {"tool_calls": [call("Read", file_path="notes.txt")]},  # the child
        {"text": "The code is 4321."},  # its report
        {"tool_calls": [task(TaskTool.description + "."), task(schema["properties"]["prompt"]["description"])]},
        {"text": "It is 4321."}])
    assert agent.run("what is the launch code?").text == "It is 4321."
    # The tool's description copied as the title is harmless: the child ran with its title.
    (report,) = runner(agent).children
    assert transcript(report["transcript_path"])[0]["description"] == TaskTool.description
    copied = tool_results(agent)[1:]
    assert len(copied) == 2 and all(r.startswith("Error: that prompt is text from the Task tool's schema")
                                    for r in copied)
    assert len(runner(agent).children) == 1 and len(engine.requests) == 5  # no second child ran

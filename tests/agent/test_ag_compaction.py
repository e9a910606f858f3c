"""Compaction with the scripted engine and real tools, hooks and transcripts (and the tiny local engine, slow)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.services.compaction import CONTINUE, CompactionError, ContextCompacted, ContextGuard
from agent.core.context import ContextBuilder
from agent.services.context_budget import BudgetConfig
from agent.engines.scripted import ScriptedEngine, render_prompt
from agent.services.hook_bridge import HookBridge
from agent.core.loop import Agent
from agent.core.transcript import Session
from agent.services.state_block import collect_instructions, parse_summary
from hooks.runner import HookRunner
from tools import builtin_tools
from tools.base import ToolContext

REPO = Path(__file__).resolve().parents[2]
FIRST = "Fix add() in calc.py.\nConstraint: do NOT touch tests/ and keep the signature `add(a, b)`. ünïcode ✓"
SECOND = "Also: never use print() for logging."
TODOS = [{"content": "Fix add", "status": "in_progress"}, {"content": "Run the tests", "status": "pending"}]
SUMMARY = ("## Goal\nFix add in calc.py\n## Decisions\n- add returns a + b now\n"
           "## Failed approaches\n- the check script exits 3\n## Next step\nRun the tests")


@pytest.fixture
def proj(tmp_path, monkeypatch):
    for name in ("AGENT_DATA_DIR", "AGENT_HOME", "CLAUDE_CONFIG_DIR", "HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    p = tmp_path / "proj"
    p.mkdir()
    (p / "AGENTS.md").write_text("Use pytest. Keep functions short.\n")
    (p / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return p


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


def session_turns():
    return [{"tool_calls": [call("TodoWrite", todos=TODOS)]},
            {"tool_calls": [call("Read", file_path="calc.py")]},
            {"tool_calls": [call("Edit", file_path="calc.py", old_string="a - b", new_string="a + b")]},
            {"tool_calls": [call("Bash", command="python -c 'import sys; sys.exit(3)'")]},
            {"text": "Fixed add."},
            {"text": "Noted."}]


def make(proj, turns, window=32768, hooks=None, config=None):
    engine = ScriptedEngine(turns, context_window=window)
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj),
                  system_prompt="You are a test agent.",
                  context=ContextBuilder(proj, proj, Path(os.environ["AGENT_HOME"]),
                                         Path(os.environ["CLAUDE_CONFIG_DIR"])))
    if hooks:
        runner = HookRunner(hooks, proj, agent.session.session_id, str(agent.session.transcript_path))
        agent.bus.subscribe(HookBridge(runner, "default"))
    return agent, engine, ContextGuard(agent, config or BudgetConfig())


def test_compaction_keeps_instructions_verbatim_todos_files_and_the_memory_prefix(proj, tmp_path):
    seen = tmp_path / "precompact.json"
    hooks = {"PreCompact": [{"matcher": "manual", "hooks": [{"type": "command", "command": f"cat > '{seen}'"}]}],
             "SessionStart": [{"matcher": "compact", "hooks": [{"type": "command", "command": "echo Re-read NOTES.md"}]}]}
    agent, engine, guard = make(proj, session_turns() + [SUMMARY], hooks=hooks)
    agent.run(FIRST)
    agent.run(SECOND)
    first_user = agent.session.messages[1]["content"]
    lead = first_user[:first_user.index(FIRST)].rstrip("\n")
    assert lead.startswith("<memory>") and "Use pytest." in lead and lead.endswith("</env>")
    before = list(agent.session.messages)
    report = guard.compact(trigger="manual", focus="the failing command")

    hook = json.loads(seen.read_text())
    assert (hook["hook_event_name"], hook["trigger"], hook["custom_instructions"]) == \
        ("PreCompact", "manual", "the failing command")
    assert engine.requests[-1].messages[:-1] == before  # the summary call extends the cached history
    assert engine.requests[-1].messages[-1]["content"].endswith("Focus the summary on: the failing command")
    calc = (proj / "calc.py")
    expected_state = "\n".join([
        "<compacted-state>",
        f"The conversation so far was compacted (manual) into this state block; it replaces {len(before)} earlier "
        "messages.",
        "## Goal", "Fix add in calc.py",
        "## User instructions (verbatim, oldest first)",
        f"<instruction>\n{FIRST}\n</instruction>", f"<instruction>\n{SECOND}\n</instruction>",
        "## Files touched", "- calc.py (read, edited)",
        "## Decisions", "- add returns a + b now",
        "## Failed approaches", "- the check script exits 3",
        "## Recent tool errors", "- Bash `python -c 'import sys; sys.exit(3)'`: exit code 3",
        "## Todo list", "[>] Fix add\n[ ] Run the tests",
        "## Next step", "Run the tests",
        "</compacted-state>"])
    attached = '<attached-file path="calc.py">\n     1\tdef add(a, b):\n     2\t    return a + b\n</attached-file>'
    assert agent.session.messages == [before[0], {"role": "user",
                                                  "content": f"{lead}\n\n{expected_state}\n\n{attached}"}]
    assert agent.ctx.todos == TODOS and list(agent.ctx.read_files) == [str(calc)]
    assert agent.pending_context == "Re-read NOTES.md"  # SessionStart(source="compact") hooks; next prompt gets it
    assert (report.trigger, report.messages_before, report.summarized, report.reattached, report.instructions) == \
        ("manual", len(before), True, ["calc.py"], 2)
    assert report.tokens_after < report.tokens_before
    # Append-only: the transcript holds every message plus a compaction record; resuming restores the state.
    lines = [json.loads(x) for x in agent.session.transcript_path.read_text().splitlines()]
    assert [x["message"] for x in lines if x["type"] == "message"] == before
    (record,) = [x for x in lines if x["type"] == "compaction"]
    assert (record["trigger"], record["messages"], record["todos"]) == ("manual", agent.session.messages, TODOS)
    back = Session.load(agent.session.transcript_path)
    assert back.messages == agent.session.messages and back.last_todos() == TODOS
    # A second compaction carries the instructions (and files) of the first forward, verbatim.
    assert collect_instructions(agent.session.messages + [{"role": "user", "content": "third"}]) == \
        [FIRST, SECOND, "third"]


def test_kv_reuse_after_compaction_is_measured(proj):
    agent, engine, guard = make(proj, session_turns() + [SUMMARY, {"text": "Running them."}])
    agent.run(FIRST)
    agent.run(SECOND)
    cached = agent.session.messages
    report = guard.compact()
    # The summary call prefills only its request: the history comes from the KV cache.
    ask = engine.requests[-1].messages[-1]["content"]
    assert report.summary_usage.reused_tokens == len(render_prompt(cached, engine.requests[-1].tools).split()) - 1
    assert report.summary_usage.prefilled_tokens == len(ask.split()) + 2  # + "<|im_start|>user", "...assistant"
    result = agent.run("What next?")
    u = result.turn_usage[0]
    system_and_tools = len(render_prompt(cached[:1], engine.requests[-1].tools).split()) - 1
    lead_words = len(agent.session.messages[1]["content"].split("<compacted-state>")[0].split())
    # system + tools + the memory/env lead survive; only the state message and the new prompt are prefilled.
    assert u.reused_tokens == system_and_tools + 1 + lead_words  # + "<|im_start|>user"
    assert u.prefilled_tokens == u.prompt_tokens - u.reused_tokens
    assert u.prefilled_tokens < report.tokens_after - system_and_tools + 10
    assert report.kept_prefix_tokens == pytest.approx(u.reused_tokens, rel=0.05)


def test_auto_compaction_mid_run_then_the_run_continues(proj):
    for n in "xyz":
        (proj / f"{n}.txt").write_text("\n".join(f"{n}{i}" for i in range(300)) + "\n")
    turns = [{"tool_calls": [call("Read", file_path=f"{n}.txt")]} for n in "xyz"] + [SUMMARY, {"text": "All read."}]
    agent, engine, guard = make(proj, turns, window=5000, config=BudgetConfig(keep_results=5, compact_at=0.5,
                                                                               clear_at=0.5))
    compacted = []
    agent.bus.subscribe(lambda e: compacted.append(e.report) if isinstance(e, ContextCompacted) else None)
    result = agent.run("Read x, y and z.")
    assert (result.stop_reason, result.text, result.num_turns) == ("end_turn", "All read.", 4)
    (report,) = compacted
    assert report.trigger == "auto" and report.tokens_before >= 2500 > report.tokens_after
    last = engine.requests[-1].messages
    assert [m["role"] for m in last] == ["system", "user"] and last[1]["content"].endswith(CONTINUE)
    assert "<instruction>\nRead x, y and z.\n</instruction>" in last[1]["content"]
    assert report.reattached == ["z.txt"]  # the most recent file that fits 15% of the window
    assert agent.session.messages == last + [{"role": "assistant", "content": "All read."}]


def test_summary_without_sections_or_with_a_tool_call(proj):
    assert parse_summary("We fixed add.") == {"Summary": "We fixed add."}
    assert parse_summary("**Goal:** fix it\nDecisions: none\n# Next steps\n- test") == \
        {"Goal": "fix it", "Decisions": "none", "Next step": "- test"}
    agent, engine, guard = make(proj, [{"text": "Hi."}, {"tool_calls": [call("Read", file_path="calc.py")]},
                                       {"text": '{"name": "Read", "arguments": {"file_path": "calc'}])
    agent.run("hello")
    report = guard.compact()
    assert (report.summarized, report.note) == (False, "the model wrote no summary")
    assert guard.compact().note == "the model answered with a tool call"  # bare JSON cut at max_tokens
    assert "## Goal\n(see the user's instructions below)" in agent.session.messages[1]["content"]
    assert "## Next step\n(not recorded: check the todo list and the instructions)" in agent.session.messages[1]["content"]


def test_blocked_or_empty_compaction_leaves_the_history_alone(proj):
    stop = """echo '{"continue": false, "stopReason": "not now"}'"""
    hooks = {"PreCompact": [{"matcher": "", "hooks": [{"type": "command", "command": stop}]}]}
    agent, engine, guard = make(proj, [{"text": "Hi."}], hooks=hooks)
    with pytest.raises(CompactionError, match="^there is nothing to compact yet$"):
        guard.compact()
    agent.run("hello")
    before = list(agent.session.messages)
    with pytest.raises(CompactionError, match="^a PreCompact hook stopped compaction: not now$"):
        guard.compact()
    assert agent.session.messages == before and len(engine.requests) == 1


def test_headless_auto_compaction_stream_json_and_continue(proj, tmp_path):
    for n in "xyz":
        (proj / f"{n}.txt").write_text("\n".join(f"w{i}" for i in range(2000)) + "\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"tool_calls": [call("Read", file_path=f"{n}.txt")]} for n in "xyz"]
                                 + [SUMMARY, {"text": "Read all three."}]))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "agent", "--engine", "scripted", "--script", str(script), "--cwd", str(proj)]
    r = subprocess.run(argv + ["-p", "Read x, y and z.", "--output-format", "stream-json", "--auto-compact-threshold",
                               "30"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    (boundary,) = [x for x in lines if x.get("subtype") == "compact_boundary"]
    meta = boundary["compact_metadata"]
    assert meta["trigger"] == "auto" and meta["pre_tokens"] > 0.3 * 32768 > meta["post_tokens"]
    assert lines[-1]["result"] == "Read all three." and lines[-1]["num_turns"] == 4
    last = lines[-1]["turn_usage"][-1]  # the call after compaction: the system prompt and tools came from the KV cache
    assert last["reused_tokens"] > 500 and last["prefilled_tokens"] < meta["post_tokens"]
    (transcript,) = (Path(os.environ["AGENT_DATA_DIR"]) / "projects").glob(f"*/{lines[-1]['session_id']}.jsonl")
    restored = Session.load(transcript).messages
    assert [m["role"] for m in restored] == ["system", "user", "assistant"]
    assert restored[1]["content"].startswith("<memory>") and "<compacted-state>" in restored[1]["content"]


@pytest.mark.slow
def test_kv_reuse_after_compaction_on_the_local_engine(proj, tiny_gguf_path, tmp_path):
    from runtime.engine import LocalEngine
    engine = LocalEngine.from_spec(str(tiny_gguf_path), cache_dir=tmp_path / "cache", threads=2)
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj),
                  system_prompt="You are a test agent.")
    agent.config.sampling.max_tokens = 8
    guard = ContextGuard(agent, BudgetConfig(summary_tokens=8))
    agent.run("Say hi.")
    cached = len(engine.session_tokens(agent.session.session_id))
    report = guard.compact()
    assert report.summary_usage.reused_tokens >= cached - 3  # only the summary request is new
    prefix = engine.builder.render_tokens(agent.session.messages[:1], agent.schemas, add_generation_prompt=False)
    result = agent.run("Again.")
    u = result.turn_usage[0]
    print(f"after compaction: prompt {u.prompt_tokens}, reused {u.reused_tokens}, prefilled {u.prefilled_tokens}; "
          f"system+tools {len(prefix)} tokens")
    assert u.reused_tokens >= len(prefix) and u.prefilled_tokens == u.prompt_tokens - u.reused_tokens

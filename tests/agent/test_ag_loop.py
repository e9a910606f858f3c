"""The ReAct loop with the scripted engine and the real built-in tools, in temporary directories."""
import json
import subprocess
import threading
import time

import pytest

from agent.core import events as ev
from agent.engines.scripted import ScriptedEngine
from agent.core.results import headless_approver
from agent.core.loop import Agent, Approval, LoopConfig, validate
from agent.core.permissions import Permissions
from agent.core.profile import choose_profile, model_parameters
from agent.core.transcript import Session
from tools import builtin_tools
from tools.base import ToolContext, ToolResult


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    p = tmp_path / "proj"
    p.mkdir()
    return p


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


SMALL = choose_profile(None, "small")  # what build_session picks for an in-process model under 2B


def make_agent(proj, turns, tools=None, profile=None, **kw):
    """An Agent on the scripted engine; with a profile, its context shaped as build_session shapes it."""
    engine = ScriptedEngine(turns)
    if profile is not None and kw.get("context") is not None:
        kw["context"].list_files = profile.env_project_files
    agent = Agent(engine, tools if tools is not None else builtin_tools(), Session.create(proj),
                  ToolContext(cwd=proj, read_window=profile.read_window if profile else None),
                  system_prompt="You are a test agent.", profile=profile, **kw)
    return agent, engine


def tool_messages(agent):
    return [(m["tool_call_id"], m["content"]) for m in agent.session.messages if m["role"] == "tool"]


def test_read_edit_bash_session(proj):
    (proj / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    agent, engine = make_agent(proj, [
        {"text": "Reading calc.py.", "tool_calls": [call("Read", file_path="calc.py")]},
        {"tool_calls": [call("Edit", file_path="calc.py", old_string="return a - b", new_string="return a + b")]},
        {"tool_calls": [call("Bash", command="python -c 'import calc; print(calc.add(2, 3))'")]},
        {"text": "Fixed: add(2, 3) is 5."}])
    result = agent.run("Fix add in calc.py")
    assert (result.stop_reason, result.text, result.num_turns, result.error) == ("end_turn", "Fixed: add(2, 3) is 5.", 4, None)
    assert (proj / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    results = tool_messages(agent)
    assert [r[0] for r in results] == ["toolu_1", "toolu_2", "toolu_3"]
    assert "return a - b" in results[0][1] and "5\n" in results[2][1] and "exit code 0" in results[2][1]
    assert [m["role"] for m in agent.session.messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"]
    assert agent.session.messages[1] == {"role": "user", "content": "Fix add in calc.py"}
    assert len(engine.requests) == 4 and engine.requests[0].tools[0]["function"]["name"] == "Read"


def test_malformed_calls_become_error_results_and_the_run_goes_on(proj):
    (proj / "a.txt").write_text("alpha\n")
    agent, _ = make_agent(proj, [
        '<tool_call>{"name": "Read", "arguments": {"file_path": </tool_call>',
        {"tool_calls": [call("Reed", file_path="a.txt"), call("Read"), call("Read", file_path=7),
                        call("Grep", pattern="x", output_mode="lines")]},
        {"tool_calls": [call("Read", file_path="a.txt")]},
        {"text": "a.txt says alpha."}])
    result = agent.run("what is in a.txt?")
    assert result.stop_reason == "end_turn" and result.text == "a.txt says alpha."
    results = tool_messages(agent)
    assert results[0] == ("toolu_1", 'Error: your tool call could not be parsed: tool call is not valid JSON '
                                     '(Expecting value at char 43). Emit one JSON object {"name": "<tool>", '
                                     '"arguments": {...}}; see the tool list for the arguments.')
    assert results[1] == ("toolu_2", "Error: there is no tool named 'Reed'. Available tools: Read, Write, Edit, "
                                     "MultiEdit, Bash, BashOutput, KillShell, Grep, Glob, LS, TodoWrite, WebFetch.")
    assert results[2] == ("toolu_3", "Error: invalid arguments for Read: missing required field 'file_path'. "
                                     "Expected: Read(file_path: string, offset?: integer, limit?: integer).")
    assert results[3][1].startswith("Error: invalid arguments for Read: file_path must be string, got integer.")
    assert results[4][1].startswith('Error: invalid arguments for Grep: output_mode must be one of "files_with_matches", "content", "count". ')
    assert "alpha" in results[5][1]


REPEAT_TURNS = [{"tool_calls": [call("Read", file_path="a.txt")]},
                {"tool_calls": [call("Read", file_path="a.txt")]},
                {"tool_calls": [call("Read", file_path="a.txt"), call("LS", path=".")]}]
WARNING = ("Error: you already made this exact Read call and its result has not changed. Do something different "
           "(other arguments, another tool) or give your final answer. Repeating it again ends the session.")


def test_repeated_identical_call_warns_once_then_gets_one_text_only_turn(proj):
    (proj / "a.txt").write_text("alpha\n")
    agent, engine = make_agent(proj, REPEAT_TURNS + [{"text": "It says alpha."}])
    result = agent.run("loop")
    assert (result.stop_reason, result.text, result.num_turns) == ("end_turn", "It says alpha.", 4)
    results = tool_messages(agent)
    assert results[1] == ("toolu_2", WARNING)
    # A read-only call repeated after the warning runs again (its result is the same), then the model must answer.
    assert results[2] == ("toolu_3", results[0][1]) and "alpha" in results[2][1]
    assert results[3][0] == "toolu_4" and "a.txt" in results[3][1]
    assert [r.tool_choice for r in engine.requests] == ["auto", "auto", "auto", "none"]


def test_repeating_in_the_text_only_turn_a_changing_call_or_with_it_off_stops_the_run(proj):
    (proj / "a.txt").write_text("alpha\n")
    stopped = "Not run: the session stopped (the model repeated an identical {} call after a warning)."
    agent, _ = make_agent(proj, REPEAT_TURNS + [{"tool_calls": [call("Read", file_path="a.txt")]}])
    result = agent.run("loop")  # an engine that cannot enforce tool_choice "none" called a tool anyway
    assert (result.stop_reason, result.num_turns) == ("repeated_calls", 4)
    assert result.error == "the model repeated an identical Read call after a warning"
    assert tool_messages(agent)[-1] == ("toolu_5", stopped.format("Read"))
    agent, _ = make_agent(proj, REPEAT_TURNS + [{"text": "never reached"}], config=LoopConfig(answer_on_repeat=False))
    result = agent.run("loop")
    assert (result.stop_reason, result.num_turns) == ("repeated_calls", 3)
    assert tool_messages(agent)[2:] == [("toolu_3", stopped.format("Read")), ("toolu_4", stopped.format("Read"))]
    bash = {"tool_calls": [call("Bash", command="false")]}
    agent, _ = make_agent(proj, [bash, bash, bash, {"text": "never reached"}])
    result = agent.run("loop")  # a call that may change things is never run a third time
    assert (result.stop_reason, result.num_turns) == ("repeated_calls", 3)
    assert tool_messages(agent)[-1] == ("toolu_3", stopped.format("Bash"))


def test_a_successful_change_makes_an_identical_call_new_again(proj):
    (proj / "t.py").write_text("x = 1\n")
    check = "python -c 'import t; print(t.x)'"
    agent, _ = make_agent(proj, [
        {"tool_calls": [call("Read", file_path="t.py")]}, {"tool_calls": [call("Bash", command=check)]},
        {"tool_calls": [call("Edit", file_path="t.py", old_string="x = 1", new_string="x = 2")]},
        {"tool_calls": [call("Bash", command=check)]},
        {"tool_calls": [call("Edit", file_path="t.py", old_string="x = 2", new_string="x = 3")]},
        {"tool_calls": [call("Bash", command=check)]}, {"text": "x is 3"}])
    result = agent.run("bump x", )
    assert result.stop_reason == "end_turn"
    outs = [c for _, c in tool_messages(agent)]
    assert [o.split("\n")[0] for o in outs[1::2]] == ["1", "2", "3"]


def test_max_turns(proj):
    (proj / "a.txt").write_text("a\n")
    agent, _ = make_agent(proj, [{"tool_calls": [call("LS", path=".")]}, {"tool_calls": [call("Read", file_path="a.txt")]},
                                 {"text": "done"}], config=LoopConfig(max_turns=2))
    result = agent.run("go")
    assert (result.stop_reason, result.num_turns, result.error) == ("max_turns", 2, "stopped after 2 turns (--max-turns)")
    assert agent.session.messages[-1]["role"] == "tool"


def test_headless_denies_what_needs_approval_and_tells_the_model(proj):
    perms = Permissions(None, "default", proj)
    agent, _ = make_agent(proj, [{"tool_calls": [call("Bash", command="touch made.txt")]}, {"text": "I could not."}],
                          permissions=perms, approver=headless_approver)
    result = agent.run("make a file")
    assert result.stop_reason == "end_turn" and not (proj / "made.txt").exists()
    ((_, content),) = tool_messages(agent)
    assert content == ("Error: permission to use Bash was denied: it needs the user's approval (Bash command needs "
                       "approval: `touch made.txt`.), and this is a non-interactive (headless) session. Do the task "
                       "without it if you can, or tell the user which permission is needed (--allowedTools or a "
                       "settings allow rule).")


def test_allow_rule_deny_rule_and_an_approving_approver(proj):
    (proj / "secret.txt").write_text("s3cret\n")
    asked = []
    perms = Permissions(None, "default", proj, cli_allowed=("Bash(touch:*)",), cli_disallowed=("Read(./secret.txt)",))

    def approver(name, args, reason):
        asked.append((name, args, reason))
        return Approval(True)

    agent, _ = make_agent(proj, [{"tool_calls": [call("Bash", command="touch ok.txt"), call("Read", file_path="secret.txt"),
                                                 call("Write", file_path="new.txt", content="hi\n")]}, {"text": "ok"}],
                          permissions=perms, approver=approver)
    agent.run("go")
    assert (proj / "ok.txt").exists() and (proj / "new.txt").read_text() == "hi\n"
    assert asked == [("Write", {"file_path": "new.txt", "content": "hi\n"}, "Write of new.txt needs approval.")]
    assert tool_messages(agent)[1][1].startswith("Error: permission to use Read was denied: ")
    assert "s3cret" not in tool_messages(agent)[1][1]


def test_pre_and_post_tool_use_decisions(proj):
    (proj / "a.txt").write_text("alpha\n")
    (proj / "b.txt").write_text("beta\n")
    agent, _ = make_agent(proj, [{"tool_calls": [call("Bash", command="rm a.txt"), call("Read", file_path="a.txt")]},
                                 {"text": "done"}])

    def hooks(e):
        if isinstance(e, ev.PreToolUse) and e.tool_name == "Bash":
            return ev.Decision("deny", "rm is not allowed here")
        if isinstance(e, ev.PreToolUse) and e.tool_name == "Read":
            return ev.Decision("allow", updated_input={"file_path": "b.txt"})
        if isinstance(e, ev.PostToolUse):
            return ev.Decision(additional_context="remember: b.txt is generated")
    agent.bus.subscribe(hooks)
    agent.run("go")
    assert (proj / "a.txt").exists()
    (r1, r2) = [c for _, c in tool_messages(agent)]
    assert r1 == "Error: a PreToolUse hook blocked this Bash call: rm is not allowed here"
    assert "beta" in r2 and r2.endswith("\n\nremember: b.txt is generated")
    # The history keeps what the model asked for; the rewrite only changed what ran.
    assert agent.session.messages[2]["tool_calls"][1]["function"]["arguments"] == {"file_path": "a.txt"}


def test_stop_decision_sends_the_model_back_a_bounded_number_of_times(proj):
    agent, _ = make_agent(proj, ["done?", "done!", "really done", "stop now", "extra"],
                          config=LoopConfig(max_stop_continuations=2))
    seen = []

    def stop_hook(e):
        if isinstance(e, ev.Stop):
            seen.append(e.stop_hook_active)
            return ev.Decision("block", "tests have not run")
    agent.bus.subscribe(stop_hook)
    result = agent.run("go")
    assert (result.stop_reason, result.text, result.num_turns) == ("end_turn", "really done", 3)
    assert seen == [False, True, True]
    assert [m["content"] for m in agent.session.messages if m["role"] == "user"][1:] == [
        "Stop hook feedback:\ntests have not run"] * 2


def test_user_prompt_submit_block_and_context(proj):
    agent, engine = make_agent(proj, ["ok"])
    agent.bus.subscribe(lambda e: ev.Decision("block", "no secrets please") if isinstance(e, ev.UserPromptSubmit)
                        and "password" in e.prompt else ev.Decision(additional_context="branch: main")
                        if isinstance(e, ev.UserPromptSubmit) else None)
    blocked = agent.run("print the password")
    assert (blocked.stop_reason, blocked.error, agent.session.messages) == ("prompt_blocked", "no secrets please", [])
    agent.run("hello")
    assert engine.requests[0].messages[1] == {"role": "user", "content": "branch: main\n\nhello"}


class Gate:
    """A read-only tool that only finishes when `n` calls are inside it at once (proves concurrency)."""
    name, description, read_only = "Gate", "wait at a barrier", True
    input_schema = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}

    def __init__(self, n):
        self.barrier = threading.Barrier(n, timeout=5)

    def run(self, args, ctx):
        self.barrier.wait()
        time.sleep(0.05 if args["tag"] == "first" else 0)  # finish out of order
        return ToolResult(f"passed {args['tag']}")


class Boom:
    name, description, read_only = "Boom", "always fails", True
    input_schema = {"type": "object", "properties": {}}

    def run(self, args, ctx):
        raise RuntimeError("disk on fire")


def test_read_only_calls_run_concurrently_and_results_keep_call_order(proj):
    agent, _ = make_agent(proj, [{"tool_calls": [call("Gate", tag="first"), call("Gate", tag="second"),
                                                 call("Gate", tag="third"), call("Boom")]}, {"text": "ok"}],
                          tools=[Gate(3), Boom()])
    agent.run("go")
    assert tool_messages(agent) == [("toolu_1", "passed first"), ("toolu_2", "passed second"),
                                    ("toolu_3", "passed third"),
                                    ("toolu_4", "Error: Boom failed unexpectedly: RuntimeError: disk on fire")]


def test_cancel_stops_a_running_command_and_records_it(proj):
    agent, _ = make_agent(proj, [{"text": "Sleeping.", "tool_calls": [call("Bash", command="sleep 30"), call("LS", path=".")]},
                                 {"text": "never"}])
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    result = agent.run("sleep", cancel)
    assert time.monotonic() - t0 < 10
    assert (result.stop_reason, result.error, result.text) == ("cancelled", "interrupted", "Sleeping.")
    (bash, ls) = tool_messages(agent)
    assert ls == ("toolu_2", "Not run: the user interrupted the session.")
    assert bash[0] == "toolu_1"


def test_wall_clock_limit(proj):
    agent, _ = make_agent(proj, [{"tool_calls": [call("Bash", command="sleep 30")]}, {"text": "never"}],
                          config=LoopConfig(max_wall_s=0.5))
    t0 = time.monotonic()
    result = agent.run("sleep")
    assert time.monotonic() - t0 < 10
    assert (result.stop_reason, result.error) == ("timeout", "stopped after the 0.5s wall-clock limit")


def test_engine_errors_and_max_tokens_are_distinct_stops(proj):
    agent, _ = make_agent(proj, [])
    assert (agent.run("x").stop_reason, agent.run("x").error) == ("error", "scripted engine: script exhausted after 0 turns")
    agent, _ = make_agent(proj, [{"text": "The answer is", "stop_reason": "max_tokens"}])
    r = agent.run("x")
    assert (r.stop_reason, r.text, r.error) == ("max_tokens", "The answer is", "the reply was cut at the max_tokens limit")


def test_events_in_order(proj):
    (proj / "a.txt").write_text("a\n")
    agent, _ = make_agent(proj, [{"text": "hi", "tool_calls": [call("Read", file_path="a.txt")]}, {"text": "bye"}])
    seen = []
    agent.bus.subscribe(lambda e: seen.append(type(e).__name__))
    agent.run("go")
    assert [n for n in seen if n != "TextDelta"] == [
        "UserPromptSubmit", "AssistantTurn", "TurnUsage", "PreToolUse", "PostToolUse", "ToolResultEvent",
        "AssistantTurn", "TurnUsage", "Stop"]
    assert seen.count("TextDelta") == 5  # "hi" in 2 chunks, "bye" in 3


def test_validate_subset():
    schema = {"type": "object", "required": ["edits"], "properties": {"edits": {"type": "array", "items": {
        "type": "object", "required": ["old_string"], "properties": {"old_string": {"type": "string"},
                                                                     "replace_all": {"type": "boolean"}}}}}}
    assert validate({"edits": [{"old_string": "a"}]}, schema) is None
    assert validate({"edits": [{"new_string": "a"}]}, schema) == "missing required field 'edits[0].old_string'"
    assert validate({"edits": [{"old_string": "a", "replace_all": 1}]}, schema) == \
        "edits[0].replace_all must be boolean, got integer"
    assert validate({"edits": "x"}, schema) == "edits must be array, got string"
    assert validate({"n": True}, {"properties": {"n": {"type": "integer"}}}) == "n must be integer, got boolean"


def test_ten_turn_session_is_append_only_and_reuses_every_cached_token(proj):
    """The harness half of the KV invariant: each request extends the previous request plus its reply."""
    from agent.core.context import ContextBuilder
    from agent.paths import repo_root
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    (proj / "AGENTS.md").write_text("Run tests with pytest.\n")
    (proj / "m.py").write_text("A = 1\nB = 2\n")
    turns = [{"text": "Plan.", "tool_calls": [call("TodoWrite", todos=[{"content": "bump A", "status": "in_progress"}])]},
             {"tool_calls": [call("Read", file_path="m.py")]},
             {"tool_calls": [call("Grep", pattern="A =", path=".")]},
             {"tool_calls": [call("Glob", pattern="*.py")]},
             {"tool_calls": [call("Edit", file_path="m.py", old_string="A = 1", new_string="A = 10")]},
             {"tool_calls": [call("Bash", command="python -c 'import m; print(m.A)'")]},
             {"tool_calls": [call("LS", path=".")]},
             {"tool_calls": [call("Reed", file_path="m.py")]},
             {"tool_calls": [call("Read", file_path="m.py"), call("Read", file_path="AGENTS.md")]},
             {"text": "A is 10 now."},
             {"text": "It was 1 before."}]
    agent, engine = make_agent(proj, turns, context=ContextBuilder(proj, repo_root(proj), proj / "h", proj / "c"))
    first = agent.run("Set A to 10")
    second = agent.run("What was A before?")
    assert (first.num_turns, first.text, second.text) == (10, "A is 10 now.", "It was 1 before.")
    reqs = engine.requests
    assert len(reqs) == 11
    for prev, cur in zip(reqs, reqs[1:]):
        reply = cur.messages[len(prev.messages)]
        assert reply["role"] == "assistant"
        assert cur.messages[:len(prev.messages) + 1] == prev.messages + [reply]
        assert cur.tools == prev.tools
    assert reqs[0].messages[0] == {"role": "system", "content": "You are a test agent."}
    assert "Run tests with pytest." in reqs[0].messages[1]["content"]
    # Measured, not assumed: every call reuses all the previous call computed (its prompt and its reply).
    usage = first.turn_usage + second.turn_usage
    assert usage[0].reused_tokens == 0
    for prev, cur in zip(usage, usage[1:]):
        assert cur.reused_tokens == prev.prompt_tokens + prev.generated_tokens
        assert cur.prefilled_tokens == cur.prompt_tokens - cur.reused_tokens > 0


def test_bus_merges_decisions_and_survives_a_broken_subscriber(capsys):
    bus = ev.EventBus()
    bus.subscribe(lambda e: ev.Decision("allow", "fine", additional_context="one"))
    bus.subscribe(lambda e: 1 / 0)
    bus.subscribe(lambda e: ev.Decision("deny", "no", additional_context="two"))
    bus.subscribe(lambda e: ev.Decision("ask", "maybe", updated_input={"x": 1}))
    d = bus.emit(ev.PreToolUse(tool_name="Bash", tool_input={}, tool_use_id="toolu_1"))
    assert d == ev.Decision("deny", "no", {"x": 1}, "one\ntwo")
    assert len(bus.errors) == 1 and "ZeroDivisionError" in bus.errors[0]
    assert capsys.readouterr().err.startswith("agent: PreToolUse subscriber ")


def test_bare_json_call_is_kept_once_as_a_call(proj):
    (proj / "a.txt").write_text("alpha\n")
    agent, _ = make_agent(proj, ['{"name": "Read", "arguments": {"file_path": "a.txt"}}', "alpha"])
    agent.run("read a.txt")
    assert agent.session.messages[2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "a.txt"}}}]}


class DrainedEngine:
    """An engine that finishes bookkeeping after yielding Done, as an engine with a worker thread does."""
    name, context_window = "drained", 4096

    def __init__(self):
        self.finished = 0

    def count_tokens(self, text):
        return len(text.split())

    def stream(self, request, *, cancel=None):
        from runtime.api import Done, TextDelta, Usage
        try:
            yield TextDelta("ok")
            yield Done(Usage(), "end_turn")
            self.finished += 1
        finally:
            if not self.finished and cancel is not None:
                cancel.set()  # the consumer left early: stop generating


def test_the_stream_is_drained_after_done(proj):
    engine = DrainedEngine()
    agent = Agent(engine, [], Session.create(proj), ToolContext(cwd=proj), system_prompt="s")
    r1, r2 = agent.run("a"), agent.run("b")
    assert (r1.stop_reason, r2.stop_reason, engine.finished) == ("end_turn", "end_turn", 2)


def test_small_model_reminder_restates_the_request_after_each_round_of_results(proj):
    (proj / "a.txt").write_text("alpha\n")
    agent, engine = make_agent(proj, [
        {"tool_calls": [call("Read", file_path="a.txt"), call("Grep", pattern="alpha")]},
        {"tool_calls": [call("Glob", pattern="*.txt")]},
        {"text": "It says alpha."}], config=LoopConfig(request_reminder=True, constrained_tools=False))
    result = agent.run("What does a.txt say?")
    assert result.text == "It says alpha."
    roles = [m["role"] for m in agent.session.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user", "assistant", "tool", "user", "assistant"]
    reminder = ("Reminder of the user's request: What does a.txt say?\n"
                "If you can answer it now, answer in plain text.")
    assert agent.session.messages[5]["content"] == agent.session.messages[8]["content"] == reminder
    # Append-only: each request's messages start with the previous request's messages (the KV prefix holds).
    for prev, cur in zip(engine.requests, engine.requests[1:]):
        assert cur.messages[:len(prev.messages)] == prev.messages
    assert not any(r.constrained_tools for r in engine.requests)


def test_after_a_round_of_failed_calls_the_reminder_asks_for_the_next_call(proj):
    (proj / "a.txt").write_text("alpha\n")
    agent, _ = make_agent(proj, [
        {"tool_calls": [call("Read", file_path="missing.txt")]},  # fails
        {"tool_calls": [call("Read", file_path="missing.txt"), call("Read", file_path="a.txt")]},  # one succeeds
        {"text": "alpha"}], config=LoopConfig(request_reminder=True, constrained_tools=False))
    assert agent.run("What does a.txt say?").text == "alpha"
    reminders = [m["content"] for m in agent.session.messages if m["role"] == "user"][1:]
    assert reminders == ["Reminder of the user's request: What does a.txt say?\n"
                         "The last call did not succeed; fix it and call a tool again.",
                         "Reminder of the user's request: What does a.txt say?\n"
                         "If you can answer it now, answer in plain text."]


def test_no_reminder_for_engines_of_unknown_size_and_long_requests_are_cut(proj):
    from agent.core.model_text import REMINDER_CHARS, request_reminder as reminder_text
    (proj / "a.txt").write_text("alpha\n")
    agent, engine = make_agent(proj, [{"tool_calls": [call("Read", file_path="a.txt")]}, {"text": "alpha"}])
    agent.run("What does a.txt say?")
    assert [m["role"] for m in agent.session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert engine.requests[0].constrained_tools
    long = reminder_text("x" * (REMINDER_CHARS + 50))
    assert "x" * REMINDER_CHARS + " [...]" in long and "x" * (REMINDER_CHARS + 1) not in long


def test_reminder_is_on_by_default_for_an_in_process_model_under_1b(proj, tiny_gguf_path):
    from runtime.engine import LocalEngine
    engine = LocalEngine.from_spec(str(tiny_gguf_path), threads=1)
    profile = choose_profile(model_parameters(engine))
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj), system_prompt="s",
                  profile=profile)
    assert (profile.name, agent.request_reminder) == ("small", True)
    assert not make_agent(proj, [])[0].request_reminder


NOTE = "You have this file's content above (unchanged); change it with Edit (old_string copied from it) or answer."


def test_a_small_model_repeating_a_read_of_a_file_is_pointed_at_it_and_may_still_edit(proj):
    (proj / "a.txt").write_text("alpha\n")
    read = {"tool_calls": [call("Read", file_path="a.txt")]}
    edit = {"tool_calls": [call("Edit", file_path="a.txt", old_string="alpha", new_string="beta")]}
    agent, engine = make_agent(proj, [read, read, edit, {"text": "done"}], profile=SMALL)
    result = agent.run("Change alpha to beta in a.txt")
    assert (result.stop_reason, result.text, result.num_turns) == ("end_turn", "done", 4)
    assert tool_messages(agent)[1] == ("toolu_2", NOTE) and (proj / "a.txt").read_text() == "beta\n"
    assert [r.tool_choice for r in engine.requests] == ["auto"] * 4
    for prev, cur in zip(engine.requests, engine.requests[1:]):  # append-only: the KV prefix holds
        assert cur.messages[:len(prev.messages)] == prev.messages


def test_a_small_model_repeating_a_read_again_or_another_read_only_call_must_answer(proj):
    (proj / "a.txt").write_text("alpha\n")
    read = {"tool_calls": [call("Read", file_path="a.txt")]}
    agent, engine = make_agent(proj, [read, read, read, {"text": "alpha"}], profile=SMALL)
    result = agent.run("What does a.txt say?")
    assert (result.stop_reason, result.text, result.num_turns) == ("end_turn", "alpha", 4)
    first, noted, again = tool_messages(agent)
    assert noted[1] == NOTE and again == ("toolu_3", first[1])  # the third time: the result again, then answer
    assert [r.tool_choice for r in engine.requests] == ["auto", "auto", "auto", "none"]
    grep = {"tool_calls": [call("Grep", pattern="alpha")]}
    agent, engine = make_agent(proj, [grep, grep, {"text": "a.txt"}], profile=SMALL)
    assert agent.run("Which file says alpha?").num_turns == 3  # not a file's Read: the text-only turn at once
    assert [r.tool_choice for r in engine.requests] == ["auto", "auto", "none"]


def test_the_repeated_read_note_names_the_window_and_a_file_changed_on_disk_is_read_again(proj):
    (proj / "big.txt").write_text("x\n" * 500)
    read = {"tool_calls": [call("Read", file_path="big.txt")]}
    agent, _ = make_agent(proj, [read, read, {"text": "ok"}], profile=SMALL)
    agent.run("read big.txt")
    assert tool_messages(agent)[1][1] == NOTE + " It showed lines 1-200 of 500; Read offset=201 for more."
    (proj / "a.txt").write_text("alpha\n")
    read = {"tool_calls": [call("Read", file_path="a.txt")]}
    agent, _ = make_agent(proj, [read, read, {"text": "gamma"}], profile=SMALL)
    # Changed by someone else before the second engine call: the identical Read is new, and runs.
    agent.before_query.append(lambda a, cancel: a.turn == 1 and (proj / "a.txt").write_text("gamma, changed\n"))
    agent.run("What does a.txt say?")
    assert "1\tgamma, changed" in tool_messages(agent)[1][1]


def test_a_failed_call_may_be_retried_after_something_succeeds(proj):
    (proj / "a.txt").write_text("alpha\n")
    edit = {"tool_calls": [call("Edit", file_path="a.txt", old_string="alpha", new_string="beta")]}
    agent, _ = make_agent(proj, [edit, {"tool_calls": [call("Read", file_path="a.txt")]}, edit, {"text": "done"}])
    result = agent.run("change alpha to beta")
    assert (result.stop_reason, result.text) == ("end_turn", "done")
    results = tool_messages(agent)
    assert "Read" in results[0][1] and "already made" not in results[2][1]
    assert (proj / "a.txt").read_text() == "beta\n"


def test_a_small_model_sees_the_files_not_the_working_directory_and_dot_paths_reach_the_project(proj):
    from agent.core.context import ContextBuilder
    (proj / "a.txt").write_text("alpha\n")
    turns = [{"tool_calls": [call("Read", file_path="."), call("Read", file_path="./a.txt")]}, {"text": "alpha"}]
    empty = proj / "nohome"
    agent, engine = make_agent(proj, turns, context=ContextBuilder(proj, proj, empty, empty), profile=SMALL)
    assert agent.run("What does a.txt say?").text == "alpha"
    first = agent.session.messages[1]["content"]
    assert "Working directory" not in first and str(proj) not in first and "Files: a.txt" in first
    listing, content = [c for _, c in tool_messages(agent)]
    assert listing.startswith(". is a directory, not a file. It contains: a.txt") and "1\talpha" in content
    # The system prompt and tools stay byte-stable across the run (KV prefix).
    assert all(r.messages[0] == engine.requests[0].messages[0] and r.tools == engine.requests[0].tools
               for r in engine.requests)
    large, _ = make_agent(proj, turns, context=ContextBuilder(proj, proj, empty, empty))
    large.run("What does a.txt say?")
    assert f"Working directory: {proj}\n" in large.session.messages[1]["content"]


def test_a_small_model_reads_in_short_windows_and_its_refused_unread_write_may_be_sent_again(proj):
    (proj / "big.py").write_text("".join(f"x{i} = {i}\n" for i in range(1, 1001)))
    write = {"tool_calls": [call("Write", file_path="big.py", content="x = 1\n")]}
    turns = [{"tool_calls": [call("Read", file_path="big.py", limit=2000)]}, write, write, {"text": "done"}]
    agent, _ = make_agent(proj, turns[1:], profile=SMALL)
    assert agent.run("replace big.py").text == "done"
    refused, wrote = [c for _, c in tool_messages(agent)]
    assert refused.startswith("big.py was not changed: you had not read it.") and "[Showing lines 1-200 of 1000." in refused
    assert wrote == "Overwrote big.py (1 line)." and (proj / "big.py").read_text() == "x = 1\n"
    (proj / "big.py").write_text("".join(f"x{i} = {i}\n" for i in range(1, 1001)))
    agent, _ = make_agent(proj, turns[:1] + [{"text": "done"}], profile=SMALL)
    agent.run("read big.py")
    assert tool_messages(agent)[0][1].count("\n") == 200  # 200 numbered lines and the tail
    # Larger models and unknown sizes keep the 2,000-line default and the plain refusal (repeat warned).
    agent, _ = make_agent(proj, turns[1:])
    agent.run("replace big.py")
    assert [c for _, c in tool_messages(agent)] == ["You must Read big.py before changing it.", WARNING.replace("Read", "Write")]

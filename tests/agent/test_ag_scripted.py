"""The scripted engine: parsing of turns, streamed chunks, honest prefix-reuse accounting, cancel."""
import json
import threading

import pytest

from agent.engines import EngineError, make_engine
from agent.engines.scripted import ScriptedEngine, ScriptError, render_prompt
from runtime.api import Done, Request, TextDelta, ToolCall

TOOLS = [{"type": "function", "function": {"name": "Read", "description": "read",
                                           "parameters": {"type": "object", "properties": {}}}}]


def drain(engine, request, cancel=None):
    events = list(engine.stream(request, cancel=cancel))
    assert isinstance(events[-1], Done) and sum(isinstance(e, Done) for e in events) == 1
    return events


def test_dict_turn_streams_text_in_chunks_then_calls():
    eng = ScriptedEngine([{"text": "Let me read the file now.", "tool_calls": [
        {"name": "Read", "arguments": {"file_path": "a.py"}}]}])
    events = drain(eng, Request("s", [{"role": "user", "content": "hi"}], TOOLS))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 3 and "".join(deltas) == "Let me read the file now."
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments, c.error) for c in calls] == [("Read", {"file_path": "a.py"}, None)]
    assert events[-1].stop_reason == "tool_use"


def test_raw_string_turn_is_parsed_like_model_output():
    raw = 'Reading.\n<tool_call>\n{"name": "Read", "arguments": {"file_path": "x"}}\n</tool_call>'
    events = drain(ScriptedEngine([raw]), Request("s", [{"role": "user", "content": "q"}], TOOLS))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Reading.\n"
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, call.arguments, call.error) == ("Read", {"file_path": "x"}, None)


def test_broken_json_becomes_a_call_with_an_error():
    raw = '<tool_call>{"name": "Read", "arguments": {"file_path": </tool_call>'
    eng = ScriptedEngine([raw, {"tool_calls": [{"name": "Read", "arguments": "{not json"}]}])
    (c1,) = [e for e in drain(eng, Request("s", [], TOOLS)) if isinstance(e, ToolCall)]
    (c2,) = [e for e in drain(eng, Request("s", [], TOOLS)) if isinstance(e, ToolCall)]
    assert c1.arguments == {} and c1.error.startswith("tool call is not valid JSON")
    assert (c2.name, c2.arguments, c2.raw) == ("Read", {}, "{not json")
    assert c2.error.startswith("tool call arguments are not valid JSON")


def test_reuse_is_the_common_prefix_with_the_previous_call_of_the_session():
    eng = ScriptedEngine(["one two", "three", "four"])
    msgs = [{"role": "system", "content": "sys prompt"}, {"role": "user", "content": "hello there"}]
    first = drain(eng, Request("s1", list(msgs)))[-1].usage
    assert (first.reused_tokens, first.prefilled_tokens) == (0, first.prompt_tokens)
    msgs += [{"role": "assistant", "content": "one two"}, {"role": "user", "content": "more"}]
    second = drain(eng, Request("s1", list(msgs)))[-1].usage
    # Everything computed last time (prompt + reply) is reused; only the new user turn is prefilled.
    assert second.reused_tokens == first.prompt_tokens + first.generated_tokens
    assert second.prefilled_tokens == second.prompt_tokens - second.reused_tokens > 0
    other = drain(eng, Request("s2", list(msgs)))[-1].usage
    assert other.reused_tokens == 0


def test_changed_history_loses_reuse_from_the_change_on():
    eng = ScriptedEngine(["a", "b"])
    drain(eng, Request("s", [{"role": "system", "content": "v1"}, {"role": "user", "content": "x"}]))
    u = drain(eng, Request("s", [{"role": "system", "content": "v2"}, {"role": "user", "content": "x"}]))[-1].usage
    assert u.reused_tokens == 1  # only "<|im_start|>system" survives the edited system prompt


def test_exhausted_script_ends_with_an_error():
    eng = ScriptedEngine(["only"])
    drain(eng, Request("s", []))
    done = drain(eng, Request("s", []))[-1]
    assert (done.stop_reason, done.error) == ("error", "scripted engine: script exhausted after 1 turns")


def test_cancel_mid_stream_keeps_partial_text_and_drops_calls():
    eng = ScriptedEngine([{"text": "a" * 30, "tool_calls": [{"name": "Read", "arguments": {}}]}], delay_s=0.2)
    cancel = threading.Event()
    got = []
    for e in eng.stream(Request("s", []), cancel=cancel):
        got.append(e)
        if isinstance(e, TextDelta):
            cancel.set()
    assert [type(e) for e in got] == [TextDelta, Done]
    assert got[-1].stop_reason == "cancelled" and got[0].text == "a" * 10


def test_script_files_and_factory_errors(tmp_path):
    good = tmp_path / "s.json"
    good.write_text(json.dumps(["hi"]))
    assert make_engine("scripted", script=str(good)).turns == ["hi"]
    bad = tmp_path / "bad.json"
    bad.write_text("[1,")
    with pytest.raises(EngineError, match=r"^script .*bad.json is not valid JSON: Expecting value at line 1$"):
        make_engine("scripted", script=str(bad))
    with pytest.raises(EngineError, match="needs --script FILE"):
        make_engine("scripted")
    with pytest.raises(ScriptError, match="script turn 1: expected an object or a string, got int"):
        ScriptedEngine([3])
    with pytest.raises(EngineError, match="unknown engine 'x'"):
        make_engine("x")


def test_render_prompt_omits_tool_call_ids_like_qwen():
    a = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "a"}}}]}
    b = json.loads(json.dumps(a))
    b["tool_calls"][0]["id"] = "call_9"
    assert render_prompt([a], []) == render_prompt([b], [])

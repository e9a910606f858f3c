"""runtime.constrain on a tiny random-weight model with the real vocabulary: random weights emit garbage,
so whatever valid call comes out is the mask's doing."""
from __future__ import annotations

import re
from concurrent.futures import Future

import jsonschema
import pytest
import torch

from runtime.api import Done, Request, Sampling, TextDelta, ToolCall
from runtime.constrain import (AFTER_CALL, BARE, CALL, START, TEXT, NoToolCalls, ToolCallConstraint, ToolGrammars,
                               tools_key)
from runtime.engine import LocalEngine
from runtime.generate import generate
from runtime.kv_cache import KVCache
from runtime.options import RuntimeOptions
from runtime.toolcalls import ToolCallParser


def tool(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name} tool", "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


# maxLength/maxItems keep a random model's strings short (else it rarely samples the closing quote).
TOOLS = [
    tool("Read", {"file_path": {"type": "string", "maxLength": 12}, "offset": {"type": "integer", "minimum": 1}},
         ["file_path"]),
    tool("Grep", {"pattern": {"type": "string", "maxLength": 8}, "-i": {"type": "boolean"},
                  "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"]}}, ["pattern"]),
    tool("TodoWrite", {"todos": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {
        "content": {"type": "string", "maxLength": 10},
        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}},
        "required": ["content", "status"], "additionalProperties": False}}}, ["todos"]),
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "look at a.py"}]


@pytest.fixture(scope="module")
def engine(tiny_gguf_path, tmp_path_factory):
    return LocalEngine.from_spec(str(tiny_gguf_path), RuntimeOptions(threads=2), cache_dir=tmp_path_factory.mktemp("cache"))


def assert_valid(call) -> None:
    assert call.error is None, (call.error, call.raw)
    jsonschema.validate(call.arguments, PARAMS[call.name])


def run_reply(engine, prefix: list[int], sampling: Sampling, constraint=None) -> list[int]:
    """Generate after the rendered prompt + `prefix` (the start of the assistant reply)."""
    prompt = engine.builder.render_tokens(MESSAGES, TOOLS) + prefix
    gen = generate(engine.model, KVCache(engine.model.config), prompt, sampling, stop_ids=engine.tokenizer.stop_ids,
                   processor=constraint)
    return list(gen)


def parse(engine, tokens: list[int]):
    parser = ToolCallParser(tool_names=frozenset(PARAMS))
    items = parser.feed(engine.tokenizer.decode(tokens)) + parser.finish()
    return parser, items


@pytest.mark.parametrize("seed", [1, 3, 4, 7])
def test_forced_tagged_call_parses_and_validates(engine, seed):
    tok = engine.tokenizer
    constraint = engine.grammars.constraint(TOOLS)
    constraint.accept(tok.tool_call_start_id)  # the reply so far: <tool_call>
    out = run_reply(engine, [tok.tool_call_start_id], Sampling(temperature=1.0, seed=seed, max_tokens=64), constraint)
    assert constraint.error is None and constraint.calls >= 1
    closed = out[: len(out) - out[::-1].index(tok.tool_call_end_id)]  # through the last </tool_call>
    parser, _ = parse(engine, [tok.tool_call_start_id] + closed)
    assert len(parser.calls) == constraint.calls
    for call in parser.calls:
        assert_valid(call)
    # The template's layout, and between calls only "\n" and the next <tool_call>: never text.
    assert re.fullmatch(r'(\n?<tool_call>\n\{"name": "\w+", "arguments": \{.*?\}\}\n</tool_call>)+',
                        tok.decode([tok.tool_call_start_id] + closed), re.S)


def test_unconstrained_forced_call_is_garbage(engine):
    """The control for the test above: the same random model without the mask does not write a call."""
    tok = engine.tokenizer
    out = run_reply(engine, [tok.tool_call_start_id], Sampling(temperature=1.0, seed=0, max_tokens=40))
    assert tok.tool_call_end_id not in out
    assert not tok.decode(out).startswith('\n{"name": ')


@pytest.mark.parametrize("opening", ['```json\n{\n  "name"', '{"name"'])
def test_bare_call_is_masked_once_the_reply_reaches_the_name_key(engine, opening):
    tok = engine.tokenizer
    prefix = tok.encode(opening)
    constraint = engine.grammars.constraint(TOOLS)
    for t in prefix:
        assert constraint.state == START
        constraint.accept(t)
    assert constraint.state == BARE
    out = run_reply(engine, prefix, Sampling(temperature=1.0, seed=3, max_tokens=200), constraint)
    assert out[-1] in tok.stop_ids and constraint.calls == 1  # the call, then end of turn, nothing else
    parser, items = parse(engine, prefix + out[:-1])
    assert [type(i) for i in items].count(type(parser.calls[0])) == 1
    assert_valid(parser.calls[0])
    assert tok.decode(prefix + out[:-1]).rstrip().endswith("```") == opening.startswith("```")


@pytest.mark.parametrize("reply", ["Hello there", "```python\nprint(1)", '{"version": 1}', "{\n  \"na", "  \n"])
def test_no_mask_outside_calls(engine, reply):
    constraint = engine.grammars.constraint(TOOLS)
    logits = torch.randn(engine.model.config.vocab_size)
    for t in engine.tokenizer.encode(reply):
        assert constraint.process(logits) is logits
        constraint.accept(t)
    assert constraint.process(logits) is logits and constraint.masked_steps == 0
    assert constraint.state == (START if reply in ("{\n  \"na", "  \n") else TEXT)


def allowed(constraint, vocab: int) -> set[int]:
    return set(torch.nonzero(constraint.process(torch.zeros(vocab)) == 0).flatten().tolist())


def test_masks_inside_and_after_a_tagged_call(engine):
    tok, vocab = engine.tokenizer, engine.model.config.vocab_size
    constraint = engine.grammars.constraint(TOOLS)
    for t in tok.encode("Let me look.\n"):
        constraint.accept(t)
    assert constraint.state == TEXT
    constraint.accept(tok.tool_call_start_id)
    first = allowed(constraint, vocab)
    assert first and all(tok.token_bytes(i).startswith(b"\n") for i in first) and len(first) < 100
    for t in tok.encode('\n{"name": "Read", "arguments": {"file_path": "a.py"}}\n'):
        assert constraint.state == CALL
        constraint.accept(t)
    assert allowed(constraint, vocab) == {tok.tool_call_end_id}  # the object is complete: only the close
    constraint.accept(tok.tool_call_end_id)
    assert constraint.state == AFTER_CALL and constraint.calls == 1
    assert allowed(constraint, vocab) == {tok.encode("\n")[0], tok.tool_call_start_id, *tok.stop_ids}
    constraint.accept(tok.encode("\n")[0])
    assert allowed(constraint, vocab) == {tok.tool_call_start_id, *tok.stop_ids}
    constraint.accept(tok.im_end_id)
    logits = torch.zeros(vocab)
    assert constraint.state == TEXT and constraint.process(logits) is logits


def test_greedy_output_without_tools_or_without_a_call_is_unchanged(engine):
    tok = engine.tokenizer
    plain = [{"role": "user", "content": "count: 1 2 3"}]
    reference = list(generate(engine.model, KVCache(engine.model.config), engine.builder.render_tokens(plain),
                              Sampling(max_tokens=12), stop_ids=tok.stop_ids))

    def stream(messages, tools, constrained):
        events = list(engine.stream(Request(f"s{len(tools)}{constrained}", messages, tools, Sampling(max_tokens=12),
                                            constrained_tools=constrained)))
        assert isinstance(events[-1], Done) and not any(isinstance(e, ToolCall) for e in events)
        return "".join(e.text for e in events if isinstance(e, TextDelta))

    assert stream(plain, [], True) == tok.decode([t for t in reference if t not in tok.stop_ids])
    assert stream(MESSAGES, TOOLS, True) == stream(MESSAGES, TOOLS, False)


def test_engine_compiles_once_per_tool_list_and_not_when_off(engine):
    other = [tool("Glob", {"pattern": {"type": "string"}}, ["pattern"])]
    list(engine.stream(Request("off", MESSAGES, other, Sampling(max_tokens=2), constrained_tools=False)))
    assert tools_key(other) not in engine.grammars._futures
    list(engine.stream(Request("on", MESSAGES, other, Sampling(max_tokens=2))))
    future = engine.grammars._futures[tools_key(other)]
    assert future.result().loose is False
    renamed = [{"type": "function", "function": {**other[0]["function"], "description": "another text"}}]
    assert engine.grammars.prepare(renamed) is future  # descriptions do not change the grammar


def test_schema_xgrammar_rejects_falls_back_to_known_names(engine):
    tok = engine.tokenizer
    odd = [tool("Find", {"pattern": {"type": "string", "pattern": "(?<=x)y"}}, ["pattern"])]  # lookbehind: unsupported
    grammars = ToolGrammars(tok, engine.model.config.vocab_size)
    assert grammars.prepare(odd).result().loose is True
    constraint = grammars.constraint(odd)
    constraint.accept(tok.tool_call_start_id)
    # Random weights pick odd token splits: leave room for the grammar to reach the arguments' brace.
    out = run_reply(engine, [tok.tool_call_start_id], Sampling(temperature=1.0, seed=1, max_tokens=48), constraint)
    assert tok.decode(out).startswith('\n{"name": "Find", "arguments": {')


def test_without_a_grammar_decoding_runs_free(engine):
    """When the compile failed (xgrammar missing here), a call opens unmasked and the reason is kept."""
    tok = engine.tokenizer
    failed = Future()
    failed.set_exception(ImportError("No module named 'xgrammar'"))
    constraint = ToolCallConstraint(engine.grammars, failed)
    constraint.accept(tok.tool_call_start_id)
    logits = torch.zeros(engine.model.config.vocab_size)
    assert constraint.state == TEXT and constraint.process(logits) is logits
    assert constraint.error == "tool-call grammar unavailable (ImportError: No module named 'xgrammar')"


def test_no_tool_calls_masks_call_openings_until_the_reply_has_text(engine):
    tok = engine.tokenizer
    proc = NoToolCalls(engine.grammars)
    brace, fence, word = tok.encode("{")[0], tok.encode("```")[0], tok.encode("Hello")[0]
    spaced = tok.encode(" {")
    logits = proc.process(torch.zeros(engine.model.config.vocab_size))
    assert logits[tok.tool_call_start_id] == float("-inf") and logits[brace] == float("-inf")
    assert logits[fence] == float("-inf") and logits[word] == 0
    if len(spaced) == 1:
        assert logits[spaced[0]] == float("-inf")
    proc.accept(tok.encode("\n")[0])  # blank: still at the start
    assert proc.process(torch.zeros(engine.model.config.vocab_size))[brace] == float("-inf")
    proc.accept(word)
    logits = proc.process(torch.zeros(engine.model.config.vocab_size))
    assert logits[brace] == 0 and logits[tok.tool_call_start_id] == float("-inf")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tool_choice_none_gives_a_text_reply(engine, seed):
    from runtime.api import Request, TextDelta, ToolCall
    req = Request(f"none-{seed}", MESSAGES, TOOLS, Sampling(temperature=1.5, seed=seed, max_tokens=12), tool_choice="none")
    events = list(engine.stream(req))
    assert not [e for e in events if isinstance(e, ToolCall)]
    text = "".join(e.text for e in events if isinstance(e, TextDelta)).lstrip()
    assert not text.startswith(("{", "[", "`")), text


def test_repetition_guard_fires_on_a_repeated_unit_only():
    from runtime.constrain import RepetitionGuard
    guard = RepetitionGuard(window=24, max_period=4)
    assert [guard.feed(t) for t in range(30)] == [None] * 30  # varied tokens
    fired = [guard.feed(t) for t in [7, 8, 9] * 10]
    assert fired.index(3) == 23 and fired[:23] == [None] * 23  # period 3 once 24 tokens repeat it
    guard = RepetitionGuard(window=24, max_period=4)
    assert all(guard.feed(t) is None for t in list(range(5)) * 8)  # a period longer than max_period is content
    guard = RepetitionGuard(window=24, max_period=4)
    assert [guard.feed(5) for _ in range(24)][-2:] == [None, 1]
    # A long unit must repeat `repeats` times even when that takes more than the window.
    guard = RepetitionGuard(window=24, max_period=8, repeats=5)
    fired = [guard.feed(t) for t in list(range(100, 108)) * 6]
    assert fired.index(8) == 39 and fired[:39] == [None] * 39


WRITE = [tool("Write", {"file_path": {"type": "string"}, "content": {"type": "string"}}, ["file_path", "content"])]
WRITE_OPENING = '\n{"name": "Write", "arguments": {"file_path": "CHANGELOG.md", "content": "'


def opened_write(engine, opening=WRITE_OPENING):
    """A constraint whose reply so far is `<tool_call>` + the opening of a Write call, inside `content`."""
    constraint = ToolCallConstraint(engine.grammars, engine.grammars.prepare(WRITE))
    for t in [engine.tokenizer.tool_call_start_id] + engine.tokenizer.encode(opening):
        constraint.accept(t)
    assert constraint.state == CALL and constraint.error is None
    return constraint


def test_a_call_looping_on_one_piece_of_text_is_flagged_and_varied_content_is_not(engine):
    from runtime.constrain import RUNAWAY_WINDOW
    tok = engine.tokenizer
    varied = opened_write(engine)
    for t in tok.encode("".join(f"- item {i}: fixed bug number {i * 7}\\n" for i in range(60))):
        varied.accept(t)
    assert varied.runaway is None and varied.state == CALL  # long content without a loop (skill-changelog)
    looping = opened_write(engine)
    unit = tok.encode("- **Bug Fix**\\n\\n- **New Feature**\\n\\n")
    for t in unit * (RUNAWAY_WINDOW // len(unit) + 2):
        looping.accept(t)
    assert looping.runaway_name == "Write" and looping.state == CALL
    assert looping.runaway.startswith("the call repeated the same text (") and "\n" not in looping.runaway
    assert looping.runaway.endswith("times in a row, so it was stopped; write each part once")
    # A sentence of about 40 tokens repeated in an Edit's new_string (a 0.5B, until max_tokens) is a loop too.
    sentence = opened_write(engine)
    unit = tok.encode("The old_string is copied exactly from the file above, including the lines that were copied "
                      "from the file. The new_string is fixed by replacing the lines with the new_string. ")
    assert 32 < len(unit) <= 64
    for t in unit * 8:
        sentence.accept(t)
    assert sentence.runaway is not None


def test_the_engine_stops_a_looping_call_and_returns_it_as_an_error(engine, monkeypatch):
    """The random model loops greedily inside a string (one token over and over), as the 0.5B did in a Write."""
    from runtime.constrain import RUNAWAY_WINDOW
    monkeypatch.setattr(engine.grammars, "constraint", lambda tools, required=False: opened_write(engine))
    request = Request("runaway", MESSAGES, WRITE, Sampling(max_tokens=1000))
    events = list(engine.stream(request))
    calls = [e for e in events if isinstance(e, ToolCall)]
    done = events[-1]
    assert len(calls) == 1 and calls[0].name == "Write" and calls[0].arguments == {}
    assert calls[0].error.startswith("the call repeated the same text (")
    assert isinstance(done, Done) and done.stop_reason == "tool_use"
    assert RUNAWAY_WINDOW <= done.usage.generated_tokens < 1000  # stopped, long before max_tokens
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert calls[0].raw == text and len(set(text[-40:])) <= 4  # the reply as streamed (the loop keeps it once)
    after = list(engine.stream(Request("runaway", MESSAGES, WRITE, Sampling(max_tokens=2))))[-1]
    assert (after.stop_reason, after.error) == ("max_tokens", None)  # the session goes on


def test_a_text_reply_that_loops_is_flagged_unless_the_prompt_holds_the_run(engine):
    from runtime.constrain import RUNAWAY_WINDOW
    from runtime.text_loop import TextLoop
    tok = engine.tokenizer
    unit = tok.encode("*.pyd\n")
    looping = TextLoop(tok, tok.encode("Create a .gitignore for this project."))
    reasons = [looping.feed(t) for t in unit * (RUNAWAY_WINDOW // len(unit) + 2)]
    first = next(i for i, r in enumerate(reasons) if r)
    assert RUNAWAY_WINDOW - 1 <= first < RUNAWAY_WINDOW + len(unit)  # once the window is one unit repeated
    assert reasons[-1].startswith("the reply repeated the same text (") and "\n" not in reasons[-1]
    varied = TextLoop(tok, [])
    assert not any(varied.feed(t) for t in tok.encode("".join(f"build/{i}/\n*.log{i}\n" for i in range(80))))
    table = "".join("0, " * 8 + "\n" for _ in range(40))  # a file's own repeated rows, copied by a rewrite
    copying = TextLoop(tok, tok.encode("rewrite data.py:\n" + table))
    assert not any(copying.feed(t) for t in tok.encode(table))


def test_the_engine_stops_a_looping_text_reply_and_its_candidates(engine):
    """The random model loops greedily (one token over and over): a text reply ends long before max_tokens."""
    from runtime.constrain import RUNAWAY_WINDOW
    events = list(engine.stream(Request("text-loop", MESSAGES, TOOLS, Sampling(max_tokens=1000), tool_choice="none")))
    done = events[-1]
    assert isinstance(done, Done) and done.stop_reason == "runaway"
    assert done.error.startswith("the reply repeated the same text (")
    assert RUNAWAY_WINDOW <= done.usage.generated_tokens < 1000
    candidates, _ = engine.sample(Request("text-loop-2", MESSAGES, TOOLS, Sampling(max_tokens=1000)), 2, greedy=2)
    assert [c.finish_reason for c in candidates] == ["runaway", "runaway"]
    assert all(RUNAWAY_WINDOW <= c.tokens < 1000 for c in candidates)
    after = list(engine.stream(Request("text-loop", MESSAGES, TOOLS, Sampling(max_tokens=2))))[-1]
    assert after.stop_reason == "max_tokens"  # the session goes on

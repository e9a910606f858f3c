"""Per-step tool narrowing on the tiny random-weight model: Request.allowed_tools, tool_choice "required" and
tool_overrides (enums, x-substring-of). Random weights write garbage, so every valid call is the mask's doing."""
from __future__ import annotations

import json

import jsonschema
import pytest

from runtime.api import Done, Request, Sampling, TextDelta, ToolCall
from runtime.constrain import grammar_tools
from runtime.engine import LocalEngine
from runtime.options import RuntimeOptions


def tool(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name} tool", "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


# maxLength keeps a random model's strings short (else it rarely samples the closing quote).
TOOLS = [
    tool("Read", {"file_path": {"type": "string", "maxLength": 12}, "offset": {"type": "integer", "minimum": 1}},
         ["file_path"]),
    tool("Grep", {"pattern": {"type": "string", "maxLength": 8}, "-i": {"type": "boolean"},
                  "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"]}}, ["pattern"]),
    tool("Edit", {"file_path": {"type": "string", "maxLength": 12}, "old_string": {"type": "string"},
                  "new_string": {"type": "string", "maxLength": 6}}, ["file_path", "old_string", "new_string"]),
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "look at a.py"}]
FILES = ["src/app.py", "README.md"]
# Quotes, a backslash, an empty line, a repeated line and a non-ASCII character: the escaping must hold.
TEXT = 'def f(x):\n    return "a\\\\b"\n\n    return x\n    return x\nprint(f(1))  # é\n'
LINES = TEXT.split("\n")[:-1]
RUNS = {"\n".join(LINES[i:j]) for i in range(len(LINES)) for j in range(i + 1, len(LINES) + 1)} - {""}
EDIT_OVERRIDE = {"type": "object", "properties": {
    "file_path": {"enum": FILES}, "old_string": {"type": "string", "x-substring-of": TEXT},
    "new_string": {"type": "string", "maxLength": 6}}, "required": ["file_path", "old_string", "new_string"],
    "additionalProperties": False}


@pytest.fixture(scope="module")
def engine(tiny_gguf_path, tmp_path_factory):
    return LocalEngine.from_spec(str(tiny_gguf_path), RuntimeOptions(threads=2, prefix_cache_bytes=0),
                                 cache_dir=tmp_path_factory.mktemp("cache"))


def reply(engine, sid: str, seed: int, **request) -> tuple[str, list[ToolCall], Done]:
    sampling = Sampling(temperature=1.0, seed=seed, max_tokens=request.pop("max_tokens", 120))
    events = list(engine.stream(Request(sid, MESSAGES, TOOLS, sampling, **request)))
    assert isinstance(events[-1], Done) and events[-1].error is None
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return text, [e for e in events if isinstance(e, ToolCall)], events[-1]


def whole_calls(calls: list[ToolCall], done: Done) -> list[ToolCall]:
    """The calls that closed: the last one may be cut by max_tokens (the random model keeps calling)."""
    if done.stop_reason == "max_tokens" and calls and calls[-1].error:
        calls = calls[:-1]
    assert calls and all(c.error is None for c in calls), [(c.error, c.raw) for c in calls]
    return calls


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_only_allowed_tools_are_called_and_required_opens_with_a_call(engine, seed):
    text, calls, done = reply(engine, f"grep-{seed}", seed, allowed_tools=["Grep"], tool_choice="required")
    assert text.strip() == ""  # between calls "\n" at most, never an answer in text
    for call in whole_calls(calls, done):
        assert call.name == "Grep"
        jsonschema.validate(call.arguments, PARAMS["Grep"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_without_required_the_random_model_writes_no_call(engine, seed):
    """The control for the test above: the same seeds under tool_choice "auto"."""
    _, calls, _ = reply(engine, f"auto-{seed}", seed, allowed_tools=["Grep"], max_tokens=24)
    assert calls == []


@pytest.mark.parametrize("seed", [1, 2])
def test_an_enum_override_binds_the_path_to_existing_files(engine, seed):
    read = {"type": "object", "properties": {"file_path": {"enum": FILES}}, "required": ["file_path"],
            "additionalProperties": False}
    _, calls, done = reply(engine, f"enum-{seed}", seed, allowed_tools=["Read"], tool_choice="required",
                           tool_overrides={"Read": read})
    assert {(c.name, c.arguments["file_path"] in FILES) for c in whole_calls(calls, done)} == {("Read", True)}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_substring_of_binds_old_string_to_whole_lines_of_the_text(engine, seed):
    _, calls, done = reply(engine, f"edit-{seed}", seed, allowed_tools=["Edit"], tool_choice="required",
                           tool_overrides={"Edit": EDIT_OVERRIDE})
    for call in whole_calls(calls, done):
        assert call.name == "Edit" and call.arguments["file_path"] in FILES
        assert call.arguments["old_string"] in RUNS, call.arguments["old_string"]


def test_the_substring_grammar_admits_every_run_of_whole_lines_and_nothing_else(engine):
    import xgrammar as xgr

    tok = engine.tokenizer
    compiled = engine.grammars.prepare(grammar_tools(TOOLS, ["Edit"], {"Edit": EDIT_OVERRIDE})).result()
    assert compiled.loose is False

    def admits(old: str) -> bool:
        matcher = xgr.GrammarMatcher(compiled.tagged)
        call = {"name": "Edit", "arguments": {"file_path": "README.md", "old_string": old, "new_string": "y"}}
        text = "\n" + json.dumps(call, ensure_ascii=False) + "\n"
        return matcher.accept_string(text) and matcher.accept_token(tok.tool_call_end_id) and matcher.is_terminated()

    assert len(RUNS) == 19 and all(admits(run) for run in RUNS)
    partial = ["", "\n", "def f", "f(x):", 'def f(x):\n    return "a', "def f(x):\n", "    return x\n\n", "\n\n",
               "    return x\n    return x\n    return x", "print(f(1))  # e", TEXT]
    assert [admits(s) for s in partial] == [False] * len(partial)


def test_allowed_tools_leave_the_prompt_and_its_kv_prefix_unchanged(engine):
    _, _, first = reply(engine, "kv", 1, max_tokens=4)
    _, calls, again = reply(engine, "kv", 1, max_tokens=40, allowed_tools=["Grep"], tool_choice="required")
    assert again.usage.prompt_tokens == first.usage.prompt_tokens
    assert again.usage.reused_tokens == again.usage.prompt_tokens - 1  # all but the one token fed to get logits
    assert calls and calls[0].name == "Grep"


def test_without_the_grammar_a_call_to_a_tool_not_allowed_is_an_error(engine, monkeypatch):
    """A grammar that does not narrow (as when the schemas fall back or decoding runs free): the engine still
    refuses the call, through the malformed-call error path."""
    real = engine.grammars.constraint
    monkeypatch.setattr(engine.grammars, "constraint", lambda tools, required=False: real(TOOLS, required=True))
    seen = set()
    for seed in (1, 2, 3, 4, 5, 6):
        _, calls, _ = reply(engine, f"free-{seed}", seed, allowed_tools=["Grep"], tool_choice="required")
        for call in calls:
            if call.name not in ("", "Grep"):  # "": a call cut by max_tokens
                assert call.error == f"{call.name} cannot be called in this step; call one of: Grep"
                seen.add(call.name)
    assert seen  # the unnarrowed grammar let the model name another tool at least once


@pytest.mark.parametrize("kw, message", [
    ({"tool_choice": "any"}, "tool_choice must be one of auto, none, required, got 'any'"),
    ({"allowed_tools": ["Bash"]}, "allowed_tools names tools not in the request's tools: Bash"),
    ({"tool_overrides": {"Write": {}}}, "tool_overrides names tools not in the request's tools: Write"),
    ({"tool_choice": "required", "allowed_tools": []}, 'tool_choice "required" needs at least one tool it may call'),
])
def test_requests_that_cannot_be_honoured_are_refused(kw, message):
    with pytest.raises(ValueError) as e:
        Request("s", MESSAGES, TOOLS, **kw)
    assert str(e.value) == message


def test_an_empty_allowed_list_means_a_text_reply(engine):
    text, calls, _ = reply(engine, "none", 1, allowed_tools=[], max_tokens=12)
    assert calls == [] and not text.lstrip().startswith(("{", "[", "`"))

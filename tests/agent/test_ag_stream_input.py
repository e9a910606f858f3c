"""--input-format stream-json: many turns in one process, through the CLI (scripted engine) and on the in-process
engine (a tiny random-weight model), where turns 2 and 3 prefill only their new tokens."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agent.session.builder import build_session
from agent.session.options import SessionOptions
from agent.ui.stream_input import InputError, run_stream_input, user_prompt

REPO = Path(__file__).resolve().parents[2]


def message(content) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": content}})


def test_user_messages_and_bad_lines():
    assert user_prompt(message("hi")) == "hi"
    assert user_prompt(message([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])) == "a\n\nb"
    for line, error in [("{", "not JSON (Expecting property name enclosed in double quotes at column 2)"),
                        ('{"type": "control_request"}', "expected a message of type \"user\", got 'control_request'"),
                        (message([{"type": "image", "source": {}}]), "only text content blocks are supported, got 'image'"),
                        (message(""), "the message is empty"),
                        (json.dumps({"type": "user", "message": {"role": "assistant", "content": "x"}}),
                         'expected "message": {"role": "user", "content": ...}')]:
        with pytest.raises(InputError) as e:
            user_prompt(line)
        assert str(e.value) == error


def test_three_turns_through_the_cli(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "notes.txt").write_text("The code is 4321.\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "One."},
                                  {"tool_calls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
                                  {"text": "It is 4321."}, {"text": "Three."}]))
    env = {**os.environ, "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "agenthome"),
           "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "PYTHONPATH": str(REPO)}
    stdin = "\n".join([message("first"), "not json", message([{"type": "text", "text": "the code?"}]),
                       "", message("third")]) + "\n"
    r = subprocess.run([sys.executable, "-m", "agent", "-p", "--input-format", "stream-json", "--output-format",
                        "stream-json", "--engine", "scripted", "--script", str(script)], cwd=proj, env=env,
                       input=stdin, capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["type"], x.get("subtype")) for x in lines] == [
        ("system", "init"), ("assistant", None), ("result", "success"), ("assistant", None), ("user", None),
        ("assistant", None), ("result", "success"), ("assistant", None), ("result", "success")]
    assert [x["result"] for x in lines if x["type"] == "result"] == ["One.", "It is 4321.", "Three."]
    assert len({x["session_id"] for x in lines}) == 1
    assert (r.returncode, r.stderr) == (1, "agent: stdin line 2: not JSON (Expecting value at column 1); skipped\n")
    r = subprocess.run([sys.executable, "-m", "agent", "-p", "--input-format", "stream-json"], cwd=proj, env=env,
                       input="", capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (1, "agent: --input-format stream-json requires --output-format stream-json\n")


def test_turns_two_and_three_prefill_only_their_new_tokens(tmp_path, monkeypatch, tiny_gguf_path):
    from runtime.engine import LocalEngine
    for name in ("HOME", "AGENT_DATA_DIR", "AGENT_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    proj = tmp_path / "proj"
    (proj / ".agent").mkdir(parents=True)
    # The free loop, not the small-model pipeline the tiny model would get by size.
    (proj / ".agent" / "settings.json").write_text('{"modelProfile": "default"}')
    engine = LocalEngine.from_spec(str(tiny_gguf_path), cache_dir=tmp_path / "cache", threads=2)
    core = build_session(SessionOptions(project=proj, headless=True, max_turns=1), engine=engine)
    core.agent.config.sampling.max_tokens = 6
    out, err = io.StringIO(), io.StringIO()
    lines = [message("Say one word."), message("And another one."), message("A third, please.")]
    run_stream_input(core, lines, prepare=lambda text, first: text, cancel=threading.Event(), out=out, err=err)
    results = [json.loads(x) for x in out.getvalue().splitlines() if json.loads(x)["type"] == "result"]
    firsts = [r["turn_usage"][0] for r in results]
    lasts = [r["turn_usage"][-1] for r in results]
    print([(u["prompt_tokens"], u["reused_tokens"], u["prefilled_tokens"]) for u in firsts])
    assert len(results) == 3 and firsts[0]["reused_tokens"] == 0
    for before, now in zip(lasts, firsts[1:]):
        # Everything the previous turn put in the cache is reused; only the new user message is prefilled.
        assert now["reused_tokens"] >= before["prompt_tokens"]
        assert now["prefilled_tokens"] == now["prompt_tokens"] - now["reused_tokens"] < 40
    core.close()

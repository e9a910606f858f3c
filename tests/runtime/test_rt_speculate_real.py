"""Speculation on the real default model: an edit that re-emits a Read file is token-identical with and
without speculation, and drafts from the file (as the model copies it) are accepted."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from runtime.api import Request, Sampling
from runtime.engine import LocalEngine
from runtime.generate import generate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine(small_gguf_path):
    return LocalEngine.from_spec(str(small_gguf_path), prefix_cache_bytes=0)


def edit_prompt(engine, first: int, count: int, old: str, new: str):
    lines = Path(textwrap.__file__).read_text().splitlines()[first - 1 : first - 1 + count]
    text = "\n".join(lines) + "\n"
    assert text.count(old) == 1
    read = "\n".join(f"{i:6}\t{line}" for i, line in enumerate(lines, 1))
    messages = [
        {"role": "system", "content": "You are a coding agent. Reply with one tool call."},
        {"role": "user", "content": f"In wrap.py change `{old}` to `{new}`. Rewrite the whole file with Write."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "wrap.py"}}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "Read", "content": read},
    ]
    prompt = engine.builder.render_tokens(messages) + engine.tokenizer.encode(
        '{"name": "Write", "arguments": {"file_path": "wrap.py", "content": "')
    expected = len(engine.tokenizer.encode(json.dumps(text.replace(old, new))))
    return messages, prompt, expected


def test_real_edit_is_token_identical_with_speculation_and_mostly_drafted(engine):
    messages, prompt, n = edit_prompt(engine, 112, 12, "width=70,", "width=100,")  # TextWrapper.__init__
    runs = {}
    for spec in (False, True):
        session = engine._session(f"edit-{spec}")
        drafter = engine._drafter(session, Request("x", messages), prompt) if spec else None
        gen = generate(engine.model, session.cache, prompt, Sampling(max_tokens=n), speculation=spec, drafter=drafter)
        runs[spec] = (list(gen), gen.usage)
    (plain, u0), (fast, u1) = runs[False], runs[True]
    assert fast == plain
    out = engine.tokenizer.decode(plain)
    assert "expand_tabs" in out and "break_on_hyphens" in out, out[:400]  # the model re-emitted the Read file
    assert u0.drafted_tokens == 0
    # How much is accepted depends on how faithfully the 0.5B copies (it re-indents this region: ~20%);
    # bench/edit.py measures a 150-line re-emission (99% accepted).
    assert u1.accepted_tokens > 0, (u1.drafted_tokens, u1.accepted_tokens, len(plain))

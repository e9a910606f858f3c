"""The real 0.5B model against an independent implementation (llama.cpp on the same GGUF), and a two-turn chat.

Greedy agreement: both implementations round activations to 8-bit blocks of 32 in their quantized dot products,
with different weight formats and rounding details (ours: Q6_K and Q8_0 tensors requantized to int8 per row,
fp32 block steps; llama.cpp: the GGUF's own blocks, fp16 steps), so their logits differ by ~0.07 RMS against
exact fp32 math on the dequantized GGUF weights (mean KL 0.00035 ours, 0.00029 llama.cpp:
bench/reference_agreement.py, docs/BENCHMARKS.md), and either may pick differently where the top two logits
are that close. Each prompt's 32 greedy tokens must equal llama.cpp's, or part from them only at a near-tie:
llama.cpp's token is our first or second choice there, less than NEAR_TIE below ours. A bug in the model
(a wrong position, scale or layer) shows up as an early clear disagreement.
"""
from __future__ import annotations

import pytest
import torch

from runtime.api import Done, Request, Sampling, TextDelta
from runtime.engine import LocalEngine
from runtime.generate import generate
from runtime.kv_cache import KVCache

pytestmark = pytest.mark.slow

N_TOKENS = 32
# Logits: about the RMS error of either implementation against exact fp32 math. On AVX2 builds (no kernel
# attention) a genuine near-tie came out at 0.111 (chat-bug, token 24; llama.cpp's token our #2).
NEAR_TIE = 0.15

CHAT_PROMPTS = {
    "chat-fib": [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number iteratively."}],
    "chat-rust": [{"role": "user", "content": "Write a Rust function that reverses the words in a string slice and returns a String."}],
    "chat-bug": [{"role": "user", "content": "Find the bug:\n\n```python\ndef mean(xs):\n    total = 0\n    for x in xs:\n"
                                             "        total += x\n    return total / len(xs) - 1\n```"}],
    "chat-sql": [{"role": "system", "content": "You are a senior engineer. Answer with code."},
                 {"role": "user", "content": "Write a SQL query that returns the 5 customers with the highest total order "
                                             "amount from tables customers(id, name) and orders(id, customer_id, amount)."}],
}
RAW_PROMPTS = {
    "raw-code": 'import json\nfrom pathlib import Path\n\n\ndef load_config(path: Path) -> dict:\n'
                '    """Read a JSON config file, returning {} when it does not exist."""\n',
}


@pytest.fixture(scope="module")
def engine(small_gguf_path) -> LocalEngine:
    return LocalEngine.from_spec(str(small_gguf_path), threads=2)


@pytest.fixture(scope="module")
def llama(small_gguf_path, llama_cpp_model):
    llama_cpp = llama_cpp_model
    return llama_cpp.Llama(model_path=str(small_gguf_path), n_threads=2, n_threads_batch=2, n_ctx=512,
                           logits_all=False, verbose=False)


def prompt_tokens(engine: LocalEngine, name: str) -> list[int]:
    if name in CHAT_PROMPTS:
        return engine.builder.render_tokens(CHAT_PROMPTS[name])
    return engine.tokenizer.encode(RAW_PROMPTS[name])


def greedy_pair(engine: LocalEngine, llama, prompt: list[int]) -> tuple[list[int], list[int]]:
    """N_TOKENS greedy tokens from ours (runtime.generate, no stop tokens) and from llama.cpp (same prompt ids)."""
    ours = list(generate(engine.model, KVCache(engine.model.config), prompt, Sampling(max_tokens=N_TOKENS), stop_ids=()))
    llama.reset()
    ref: list[int] = []
    for token in llama.generate(prompt, temp=0.0):
        ref.append(token)
        if len(ref) == N_TOKENS:
            break
    return ours, ref


def divergence(engine: LocalEngine, prompt: list[int], ours: list[int], ref: list[int]) -> tuple[int, float, int] | None:
    """None when identical; else (index, our logit of our pick minus llama.cpp's pick, rank of llama.cpp's pick in ours)."""
    i = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), None)
    if i is None:
        return None
    seq = prompt + ours[:i]
    logits = engine.model.forward(torch.tensor(seq), torch.arange(len(seq)), KVCache(engine.model.config), last_only=True)[0]
    rank = int((logits > logits[ref[i]]).sum())
    return i, float(logits[ours[i]] - logits[ref[i]]), rank


@pytest.mark.parametrize("name", ["chat-fib", "chat-rust", "chat-bug", "chat-sql", "raw-code"])
def test_greedy_matches_llama_cpp_or_parts_at_a_near_tie(engine, llama, name):
    prompt = prompt_tokens(engine, name)
    ours, ref = greedy_pair(engine, llama, prompt)
    assert len(ours) == N_TOKENS
    found = divergence(engine, prompt, ours, ref)
    if found is not None:
        i, margin, rank = found
        assert rank <= 1 and abs(margin) < NEAR_TIE, (
            f"{name}: greedy diverges from llama.cpp at token {i} (ours {ours[i]} {engine.tokenizer.decode([ours[i]])!r}, "
            f"llama.cpp {ref[i]} {engine.tokenizer.decode([ref[i]])!r}); our logit margin {margin:+.3f}, "
            f"llama.cpp's token is our #{rank + 1}; common text: {engine.tokenizer.decode(ours[:i])!r}")


def chat(engine: LocalEngine, sid: str, messages: list[dict], max_tokens: int) -> tuple[str, Done]:
    events = list(engine.stream(Request(sid, messages, sampling=Sampling(max_tokens=max_tokens))))
    done = events[-1]
    assert isinstance(done, Done) and done.error is None, done
    return "".join(e.text for e in events if isinstance(e, TextDelta)), done


def test_second_turn_prefills_only_its_new_tokens(engine):
    """Turn 2 reuses turn 1's KV: it prefills its new tokens plus exactly two it must re-feed.

    After turn 1 the session's tokens are prompt + reply (ending in the sampled <|im_end|>) + "\\n" glue.
    By runtime.generate's cache contract the KV cache holds all of that but the last sampled token
    (<|im_end|>, never fed) and the glue ("\\n", never generated), so turn 2 prefills those 2 + its new tokens.
    """
    msgs = [{"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Which programming language uses the keyword `def` to define a function?"}]
    text1, done1 = chat(engine, "two-turn", msgs, max_tokens=16)
    assert done1.stop_reason == "end_turn" and text1.strip(), (done1, text1)
    u1 = done1.usage
    assert (u1.reused_tokens, u1.prefilled_tokens) == (0, u1.prompt_tokens)
    turn1 = engine.session_tokens("two-turn")
    im_end, newline = engine.tokenizer.encode_with_specials("<|im_end|>\n")
    assert turn1[-2:] == [im_end, newline] and len(turn1) == u1.prompt_tokens + u1.generated_tokens + 1

    msgs2 = msgs + [{"role": "assistant", "content": text1}, {"role": "user", "content": "And which one uses `fn`?"}]
    _, done2 = chat(engine, "two-turn", msgs2, max_tokens=4)
    u2 = done2.usage
    new_tokens = u2.prompt_tokens - len(turn1)
    assert engine.session_tokens("two-turn")[: len(turn1)] == turn1  # turn 2's prompt extends turn 1 verbatim
    assert new_tokens > 0
    assert (u2.reused_tokens, u2.prefilled_tokens) == (len(turn1) - 2, new_tokens + 2)

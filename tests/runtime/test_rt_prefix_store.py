"""Warm starts across processes: the prefix KV store (runtime.prefix_store) behind LocalEngine.

A second LocalEngine over the same cache directory stands for a new process (one test runs a real
subprocess); the tiny random-weight GGUF keeps it fast.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from runtime.api import Done, Request, Sampling, TextDelta
from runtime.engine import LocalEngine
from runtime.kv_cache import KVCache
from runtime.options import RuntimeOptions
from runtime.prefix_store import STORE_MIN_NEW_TOKENS, PrefixStore, weights_fingerprint

TOOLS = [{"type": "function", "function": {"name": "Read", "description": "Read a file",
                                          "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}},
                                                         "required": ["file_path"]}}}]
SYSTEM = "You are a coding agent. " + " ".join(f"rule {i}: be careful with file number {i}." for i in range(40))
MEMORY = "<memory>\n# AGENTS.md\nRun the tests with pytest. Keep functions short.\n</memory>\n\n"


def messages(user: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": MEMORY + user}]


def engine_for(gguf: Path, cache: Path, options: RuntimeOptions | None = None, **kw) -> LocalEngine:
    return LocalEngine.from_spec(str(gguf), options or RuntimeOptions(threads=2), cache_dir=cache, **kw)


def run(engine: LocalEngine, sid: str, msgs: list[dict], max_tokens: int = 6):
    events = list(engine.stream(Request(sid, msgs, TOOLS, Sampling(max_tokens=max_tokens))))
    done = events[-1]
    assert isinstance(done, Done) and done.error is None, done
    engine.wait_for_prefix_store()
    return "".join(e.text for e in events if isinstance(e, TextDelta)), done.usage


def entries(engine: LocalEngine) -> list[Path]:
    return sorted(engine.prefix_store.dir.glob("*.kv"))


@pytest.fixture(scope="module")
def cache_dir(tiny_gguf_path, tmp_path_factory):
    """A cache dir with the tiny model already converted (the converted weights are shared by the tests)."""
    d = tmp_path_factory.mktemp("cache")
    engine_for(tiny_gguf_path, d, prefix_cache_bytes=0)
    return d


def fresh_store(tiny_gguf_path, cache_dir, tmp_path, options: RuntimeOptions | None = None, **kw) -> LocalEngine:
    return engine_for(tiny_gguf_path, cache_dir, options, prefix_dir=tmp_path / "prefix", **kw)


def test_new_engine_first_turn_served_from_disk_same_tokens_as_cold(tiny_gguf_path, cache_dir, tmp_path):
    first = fresh_store(tiny_gguf_path, cache_dir, tmp_path)
    _, u1 = run(first, "s1", messages("Where is main defined?"))
    assert u1.reused_tokens == 0 and u1.prompt_tokens > STORE_MIN_NEW_TOKENS
    assert len(entries(first)) == 1
    stored = KVCache.load(entries(first)[0], first.model.config, model_id=first.prefix_store.kv_id)
    assert stored.length == u1.prompt_tokens

    # "A new process": another engine over the same store; its first turn asks something else.
    msgs = messages("List the test files, please.")
    second = fresh_store(tiny_gguf_path, cache_dir, tmp_path)
    warm_text, warm = run(second, "s2", msgs)
    cold_text, cold = run(fresh_store(tiny_gguf_path, cache_dir, tmp_path, prefix_cache_bytes=0), "s3", msgs)
    assert warm.prompt_tokens == cold.prompt_tokens
    user_tokens = len(second.tokenizer.encode("List the test files, please."))
    assert warm.reused_tokens >= warm.prompt_tokens - user_tokens - 8  # all but the user's text and glue
    assert warm.prefilled_tokens == warm.prompt_tokens - warm.reused_tokens
    assert cold.reused_tokens == 0
    assert warm_text == cold_text
    assert len(entries(second)) == 1  # the entry already covered nearly all of the prompt: nothing new written


def test_disk_kv_is_exact_and_logits_match_a_cold_prefill(tiny_gguf_path, cache_dir, tmp_path):
    engine = fresh_store(tiny_gguf_path, cache_dir, tmp_path)
    run(engine, "a", messages("first question"))
    in_memory = engine._sessions["a"].cache
    prompt = engine.builder.build(messages("a different question"), TOOLS).tokens
    store = engine.prefix_store
    match = store.lookup(prompt)
    loaded = store.load(match)
    n = loaded.length
    assert n == match.common > 200
    # Served bytes are exactly what the first session computed.
    assert loaded.tokens == in_memory.tokens[:n]
    assert torch.equal(loaded.k[:, :, :n], in_memory.k[:, :, :n]) and torch.equal(loaded.v[:, :, :n], in_memory.v[:, :, :n])
    # The next token's logits from the disk prefix + the rest equal those of a cold prefill of the whole prompt.
    model = engine.model
    warm = model.forward(torch.tensor(prompt[n:]), torch.arange(n, len(prompt)), loaded, last_only=True)
    cold_cache = KVCache(model.config, model_id=engine.model_id)
    for i in range(0, len(prompt), model.prefill_chunk):
        piece = prompt[i:i + model.prefill_chunk]
        cold = model.forward(torch.tensor(piece), torch.arange(i, i + len(piece)), cold_cache, last_only=True)
    assert torch.allclose(warm, cold, atol=1e-4, rtol=1e-4)
    assert warm.argmax() == cold.argmax()


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "other-model", "bad-index"])
def test_damaged_or_foreign_entries_are_ignored_and_rebuilt(damage, tiny_gguf_path, make_tiny_gguf, cache_dir, tmp_path):
    engine = fresh_store(tiny_gguf_path, cache_dir, tmp_path)
    cold_text, _ = run(engine, "a", messages("question one"))
    (kv,) = entries(engine)
    index = kv.with_suffix(".tokens")
    if damage == "corrupt":
        data = bytearray(kv.read_bytes())
        data[-100:-90] = bytes(10)
        kv.write_bytes(bytes(data))
    elif damage == "truncated":
        kv.write_bytes(kv.read_bytes()[: kv.stat().st_size // 2])
    elif damage == "other-model":
        # Same file name, other weights: its own store dir; its files copied over ours must not be used.
        (tmp_path / "other").mkdir()
        other_gguf = make_tiny_gguf(tmp_path / "other" / tiny_gguf_path.name, seed=7)
        other = engine_for(other_gguf, tmp_path / "other-cache", prefix_dir=tmp_path / "prefix")
        assert other.prefix_store.dir != engine.prefix_store.dir
        run(other, "o", messages("question one"))
        (other_kv,) = entries(other)
        kv.write_bytes(other_kv.read_bytes())
    else:
        index.write_text("{not json")
    again = fresh_store(tiny_gguf_path, cache_dir, tmp_path)
    text, usage = run(again, "b", messages("question one"))
    assert usage.reused_tokens == 0 and text == cold_text
    # ... and the entry was rebuilt by that cold prefill.
    (rebuilt,) = entries(again)
    assert KVCache.load(rebuilt, again.model.config, model_id=again.prefix_store.kv_id).length == usage.prompt_tokens
    _, usage = run(fresh_store(tiny_gguf_path, cache_dir, tmp_path), "c", messages("question one"))
    assert usage.reused_tokens == usage.prompt_tokens - 1


def test_eviction_keeps_the_budget_and_drops_the_least_recently_used(tiny_gguf_path, cache_dir, tmp_path):
    probe = fresh_store(tiny_gguf_path, cache_dir, tmp_path)
    prompt_tokens = len(probe.builder.build(messages("q"), TOOLS).tokens)
    per_entry = prompt_tokens * probe.prefix_store.bytes_per_token
    budget = int(2.5 * per_entry)
    engine = fresh_store(tiny_gguf_path, cache_dir, tmp_path, prefix_cache_bytes=budget)
    systems = [f"Project {name}. " + SYSTEM for name in ("alpha", "beta", "gamma")]
    for i, system in enumerate(systems[:2]):
        run(engine, f"s{i}", [{"role": "system", "content": system}, {"role": "user", "content": "q"}])
    assert len(entries(engine)) == 2
    # Use alpha's entry again (a new session starting from it), so beta is the least recently used.
    old = [e for e in engine.prefix_store.entries()]
    for index, _, _ in old:
        os.utime(index, (1_000_000, 1_000_000))
    _, usage = run(engine, "again", [{"role": "system", "content": systems[0]}, {"role": "user", "content": "q2"}])
    assert usage.reused_tokens > 200
    run(engine, "s2", [{"role": "system", "content": systems[2]}, {"role": "user", "content": "q"}])
    assert engine.prefix_store.total_bytes() <= budget
    kept = [json.loads(i.read_text())["tokens"] for i, _, _ in engine.prefix_store.entries()]
    decoded = [engine.tokenizer.decode(t) for t in kept]
    assert len(kept) == 2
    assert any("alpha" in d for d in decoded) and any("gamma" in d for d in decoded)
    assert not any("beta" in d for d in decoded)


def test_disable_knobs(tiny_gguf_path, cache_dir, tmp_path):
    off = fresh_store(tiny_gguf_path, cache_dir, tmp_path, prefix_cache_bytes=0)
    assert off.prefix_store is None
    run(off, "a", messages("hello"))
    assert not (tmp_path / "prefix").exists()
    assert fresh_store(tiny_gguf_path, cache_dir, tmp_path, RuntimeOptions(prefix_cache_bytes=0)).prefix_store is None
    sized = fresh_store(tiny_gguf_path, cache_dir, tmp_path, RuntimeOptions(prefix_cache_bytes=64 << 20))
    assert sized.prefix_store.budget == 64 << 20
    assert fresh_store(tiny_gguf_path, cache_dir, tmp_path).prefix_store.budget == 1 << 30


def test_only_a_sessions_first_call_uses_the_store(tiny_gguf_path, cache_dir, tmp_path):
    engine = fresh_store(tiny_gguf_path, cache_dir, tmp_path)
    text, _ = run(engine, "a", messages("one"))
    assert len(entries(engine)) == 1
    # Later turns of the session extend its own cache and write nothing.
    msgs = messages("one") + [{"role": "assistant", "content": text}, {"role": "user", "content": "word " * 400}]
    _, usage = run(engine, "a", msgs)
    assert usage.reused_tokens > 200 and len(entries(engine)) == 1
    # A forked child starts from its parent's cache in memory, not from disk.
    engine.fork_session("a", "child")
    _, usage = run(engine, "child", messages("two"))
    assert usage.reused_tokens > 200 and len(entries(engine)) == 1


def test_store_unit_roundtrip_and_fingerprint(tiny_gguf_path, cache_dir, tmp_path):
    engine = fresh_store(tiny_gguf_path, cache_dir, tmp_path, prefix_cache_bytes=0)
    store = PrefixStore(tmp_path / "p", engine.model_id, engine.model.config,
                        fingerprint=weights_fingerprint(engine.model), budget_bytes=1 << 30)
    assert store.lookup([1, 2, 3]) is None
    cache = KVCache(engine.model.config, model_id=engine.model_id)
    tokens = list(range(100, 140))
    engine.model.forward(torch.tensor(tokens), torch.arange(len(tokens)), cache)
    assert store.store(cache).exists()
    match = store.lookup(tokens[:30] + [7, 7])
    assert (match.common, match.length) == (30, 40)
    assert store.load(match).tokens == tokens[:30]
    assert not store.should_store(40 + STORE_MIN_NEW_TOKENS - 1, 40) and store.should_store(40 + STORE_MIN_NEW_TOKENS, 40)
    assert weights_fingerprint(engine.model) == weights_fingerprint(engine.model)


SCRIPT = textwrap.dedent("""
    import json, sys
    from runtime.api import Done, Request, Sampling, TextDelta
    from runtime.engine import LocalEngine
    from runtime.options import RuntimeOptions
    gguf, cache, prefix, msgs, tools = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
    engine = LocalEngine.from_spec(gguf, RuntimeOptions(threads=1), cache_dir=cache, prefix_dir=prefix)
    events = list(engine.stream(Request("s", msgs, tools, Sampling(max_tokens=6))))
    u = events[-1].usage
    print(json.dumps({"text": "".join(e.text for e in events if isinstance(e, TextDelta)),
                      "reused": u.reused_tokens, "prefilled": u.prefilled_tokens, "prompt": u.prompt_tokens}))
""")  # no explicit wait: the process must finish its prefix-store write before it exits


def test_real_subprocesses_cold_then_warm(tiny_gguf_path, cache_dir, tmp_path):
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def child(user: str) -> dict:
        argv = [sys.executable, "-c", SCRIPT, str(tiny_gguf_path), str(cache_dir), str(tmp_path / "prefix"),
                json.dumps(messages(user)), json.dumps(TOOLS)]
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold = child("Explain the build.")
    warm = child("Explain the build.")
    other = child("Something else entirely")
    assert cold["reused"] == 0 and cold["prefilled"] == cold["prompt"]
    assert warm["reused"] == warm["prompt"] - 1 and warm["text"] == cold["text"]
    assert other["reused"] > 200 and other["prefilled"] < 20


def test_a_session_that_starts_with_sampled_candidates_starts_warm_and_stores_its_prompt(tiny_gguf_path, cache_dir,
                                                                                         tmp_path):
    """Verified tries' first call is engine.sample, not a stream: it uses the store the same way."""
    def candidates(engine: LocalEngine, sid: str, user: str):
        request = Request(sid, messages(user), TOOLS, Sampling(temperature=0.6, seed=3, max_tokens=6))
        out, usage = engine.sample(request, 2, greedy=1)
        engine.wait_for_prefix_store()
        return [c.text for c in out], usage

    first = fresh_store(tiny_gguf_path, cache_dir, tmp_path)
    _, u1 = candidates(first, "s1", "Implement the stub in geo.py.")
    assert u1.reused_tokens == 0 and len(entries(first)) == 1
    user = "Implement the stubs in table.py so the tests pass."
    warm_texts, warm = candidates(fresh_store(tiny_gguf_path, cache_dir, tmp_path), "s2", user)
    cold_texts, cold = candidates(fresh_store(tiny_gguf_path, cache_dir, tmp_path, prefix_cache_bytes=0), "s3", user)
    assert cold.reused_tokens == 0 and warm.prompt_tokens == cold.prompt_tokens
    assert warm.reused_tokens >= warm.prompt_tokens - len(first.tokenizer.encode(user)) - 8
    assert warm.prefilled_tokens == warm.prompt_tokens - warm.reused_tokens
    assert warm_texts == cold_texts

"""LocalEngine on a GPU (marked gpu; skipped without CUDA): one random-weight GGUF of the 0.5B's shapes.

The promises of the CUDA path, one test each: CUDA and CPU agree on 64 greedy tokens (a difference only at a
near-tie, its margin printed); speculative decoding emits plain decoding's tokens; session KV save/load, fork
and the prefix store work on the device; Q4_K weights run as int4 and the other types as int8.
The GGUF has the 0.5B's layers, widths and heads (24 x 896, 14/2 heads of 64, FFN 4864) and the 261-token
byte vocabulary of tests/conftest.py (the real one needs the bundled model, which a GPU machine may lack).
"""
from __future__ import annotations

import pytest
import torch

from runtime.api import Done, Request, Sampling, TextDelta
from runtime.engine import LocalEngine
from runtime.generate import generate
from runtime.options import RuntimeOptions

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

DIMS_05B = dict(num_layers=24, hidden=896, heads=14, kv_heads=2, ffn=4864)
STEPS = 64
# The CPU runs int8 weights with 8-bit activations, the GPU bf16: their logits differ by a few percent of a
# logit's standard deviation (printed). A difference in the greedy tokens is a near-tie when each model's
# margin for its own pick is within twice that difference as measured on the steps before it; and the
# difference itself must stay small (a real fault moves logits by their whole scale).
MAX_NOISE = 0.25


@pytest.fixture(scope="module")
def gguf_05b(make_tiny_gguf, tmp_path_factory):
    return make_tiny_gguf(tmp_path_factory.mktemp("g05") / "random-05b.gguf", vocab="bytes", weight_type="F16",
                          **DIMS_05B)


@pytest.fixture(scope="module")
def engines(gguf_05b, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    cpu = LocalEngine.from_spec(str(gguf_05b), RuntimeOptions(device="cpu", prefix_cache_bytes=0), cache_dir=cache)
    gpu = LocalEngine.from_spec(str(gguf_05b), RuntimeOptions(device="cuda", prefix_cache_bytes=0), cache_dir=cache)
    assert type(gpu.model).__name__ == "CudaModel" and type(cpu.model).__name__ != "CudaModel"
    return cpu, gpu


def _prompt(engine, text="def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n"):
    return engine.builder.build([{"role": "user", "content": text}], [], None).tokens


def _greedy(model, prompt, **kw):
    gen = generate(model, model.new_cache(), prompt, Sampling(max_tokens=STEPS), stop_ids=(), **kw)
    return list(gen), gen.usage


def _logits_along(model, prompt, tokens):
    """Teacher-forced: logits before each of `tokens` (prompt prefilled, then one decode step per token)."""
    cache = model.new_cache()
    rows = [model.forward(torch.tensor(prompt), torch.arange(len(prompt)), cache, last_only=True)[0]]
    for t in tokens[:-1]:
        rows.append(model.forward(torch.tensor([t]), torch.tensor([cache.length]), cache)[0])
    return torch.stack(rows).float()


def test_cuda_and_cpu_agree_on_64_greedy_tokens(engines):
    """Greedy through each engine's model; then both models teacher-forced along the CPU's tokens, to show
    how far their logits are apart and, at a difference, each one's margin."""
    cpu, gpu = engines
    prompt = _prompt(cpu)
    ours, _ = _greedy(cpu.model, prompt, speculation=False)
    theirs, _ = _greedy(gpu.model, prompt, speculation=False)
    assert len(ours) == len(theirs) == STEPS
    same = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), STEPS)
    lc, lg = _logits_along(cpu.model, prompt, ours), _logits_along(gpu.model, prompt, ours)
    scale = lc.std(-1)
    diff = (lc - lg).abs().amax(-1) / scale  # per step, in units of a logit's std
    noise = float(diff[: max(same, 1)].max())
    print(f"\nCPU and CUDA agree on {same} of {STEPS} greedy tokens; max |logit diff| {noise:.4f} of a logit's std")
    assert noise < MAX_NOISE
    if same < STEPS:
        a, b = ours[same], theirs[same]
        m_cpu = float((lc[same, a] - lc[same, b]) / scale[same])
        m_gpu = float((lg[same, b] - lg[same, a]) / scale[same])
        print(f"first difference at token {same}: CPU {a} over {b} by {m_cpu:.4f}, CUDA {b} over {a} by {m_gpu:.4f} "
              f"(of a logit's std; a near-tie within {2 * noise:.4f})")
        assert m_cpu <= 2 * noise and m_gpu <= 2 * noise, "the engines differ at a step that is no near-tie"


class _OracleDrafter:
    """Drafts the next tokens of a known sequence, every second draft with a wrong last token: both the
    accepting and the rejecting verify paths run, whatever the random model emits."""

    def __init__(self, prompt, truth):
        self.seen, self.full, self.calls = len(prompt), list(prompt) + list(truth), 0

    def draft(self, k):
        self.calls += 1
        out = self.full[self.seen : self.seen + k]
        if out and self.calls % 2 == 0:
            out[-1] = (out[-1] + 1) % 256
        return out

    def extend(self, tokens):
        self.seen += len(tokens)


def test_speculative_decoding_emits_plain_tokens_on_the_gpu(engines):
    _, gpu = engines
    prompt = _prompt(gpu, "x = [1, 2, 3, 1, 2, 3, 1, 2, 3]\n" * 4)
    plain, _ = _greedy(gpu.model, prompt, speculation=False)
    spec, usage = _greedy(gpu.model, prompt, speculation=True, drafter=_OracleDrafter(prompt, plain))
    print(f"\nspeculation: {usage.drafted_tokens} drafted, {usage.accepted_tokens} accepted")
    assert usage.drafted_tokens > 0 and 0 < usage.accepted_tokens < usage.drafted_tokens
    assert spec == plain
    lookup, _ = _greedy(gpu.model, prompt, speculation=True)  # the engine's own drafter (prompt lookup)
    assert lookup == plain


def _run(engine, sid, text, max_tokens=12):
    events = list(engine.stream(Request(sid, [{"role": "user", "content": text}], [], Sampling(max_tokens=max_tokens))))
    done = events[-1]
    assert isinstance(done, Done) and done.error is None, getattr(done, "error", None)
    return "".join(e.text for e in events if isinstance(e, TextDelta)), done.usage


def test_session_save_load_and_fork_on_the_gpu(engines, tmp_path):
    _, gpu = engines
    text = "explain the loop\n" * 3
    first, _ = _run(gpu, "orig", text)
    assert type(gpu._sessions["orig"].cache).__name__ == "CudaKVCache"
    assert gpu.save_session("orig", tmp_path / "orig.kv")
    assert gpu.load_session("loaded", tmp_path / "orig.kv") == gpu._sessions["orig"].cache.length
    n = gpu.fork_session("orig", "forked")
    assert n == gpu._sessions["orig"].cache.length
    for sid in ("loaded", "forked"):
        cache = gpu._sessions[sid].cache
        assert cache.k.device == gpu.model.device and cache.tokens == gpu._sessions["orig"].cache.tokens
    # the same next step from the original, the loaded and the forked cache
    outs = []
    for sid in ("orig", "loaded", "forked"):
        cache = gpu._sessions[sid].cache
        outs.append(gpu.model.forward(torch.tensor([65]), torch.tensor([cache.length]), cache))
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_prefix_store_warm_start_on_the_gpu(gguf_05b, tmp_path):
    opts = RuntimeOptions(device="cuda", prefix_cache_bytes=1 << 30)
    long_text = "".join(f"line {i}: value = {i * i}\n" for i in range(40))  # ~700 byte tokens: worth storing
    cold = LocalEngine.from_spec(str(gguf_05b), opts, cache_dir=tmp_path)
    a, usage_a = _run(cold, "s1", long_text)
    cold.wait_for_prefix_store()
    assert usage_a.reused_tokens == 0 and cold.prefix_store.entries(), "the prompt's KV was not stored"
    warm = LocalEngine.from_spec(str(gguf_05b), opts, cache_dir=tmp_path)  # another engine: from the store only
    b, usage_b = _run(warm, "s2", long_text)
    n = usage_b.reused_tokens
    assert n > 16 and usage_b.prefilled_tokens < usage_a.prefilled_tokens
    mine, theirs = warm._sessions["s2"].cache, cold._sessions["s1"].cache
    assert type(mine).__name__ == "CudaKVCache" and mine.k.device.type == "cuda"
    assert torch.equal(mine.k[:, :, :n], theirs.k[:, :, :n]) and torch.equal(mine.v[:, :, :n], theirs.v[:, :, :n])
    # The warm run feeds the prompt's tail as a decode step where the cold one prefilled it whole (SDPA):
    # the texts may part at a near-tie, so they are shown, not compared.
    print(f"\nprefix store: {n} of {usage_b.prompt_tokens} prompt tokens reused; replies equal: {a == b}")


def test_q4k_weights_run_as_int4_and_the_rest_as_int8():
    """The 0.5B's widths (2 layers) in runtime.weights' formats, types as in its Q4_K_M file: ffn_down a real
    Q4_K, the rest posing as Q5_0/Q8_0 -> build_cuda_model(weights="int4"): Q4_K runs as int4, the rest as
    int8; logits close to the CPU model's on the same quantized weights."""
    from runtime.config import ModelConfig
    from runtime.cuda import build_cuda_model
    from runtime.kv_cache import KVCache
    from runtime.model import Qwen2Model, random_gguf_tensors
    from runtime.weights import prepare_tensor

    cfg = ModelConfig(arch="qwen2", vocab_size=1000, hidden_size=896, intermediate_size=4864, num_layers=2,
                      num_heads=14, num_kv_heads=2, head_dim=64, context_length=4096)
    tensors = {}
    for name, (w, ggml_type) in random_gguf_tensors(cfg, seed=0).items():
        ggml_type = "Q8_0" if ggml_type == "Q5_0" else ggml_type  # random weights are no Q5_0: skip its search
        tensors.update(prepare_tensor(name, w, ggml_type))
    ref = Qwen2Model.from_tensors(cfg, tensors)
    int4 = build_cuda_model(cfg, tensors, weights="int4")
    assert {b.ffn_down.kind for b in int4.blocks} == {"int4"}
    assert {lin.kind for b in int4.blocks for lin in (b.qkv, b.attn_output, b.gate_up)} == {"int8"}
    int8 = build_cuda_model(cfg, tensors, weights="int8")
    assert {lin.kind for b in int8.blocks for lin in (b.qkv, b.attn_output, b.gate_up, b.ffn_down)} == {"int8"}
    bf16 = build_cuda_model(cfg, tensors)
    assert int4.weight_bytes < int8.weight_bytes < bf16.weight_bytes
    prompt = torch.arange(1, 40)
    want = ref.forward(prompt, torch.arange(39), KVCache(cfg))
    for m in (int4, int8):
        got = m.forward(prompt, torch.arange(39), m.new_cache())
        err = float((got - want).abs().max() / want.abs().max())
        assert err < 0.05, err  # bf16 activations on the GPU, 8-bit activation blocks on the CPU

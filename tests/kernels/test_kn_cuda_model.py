"""runtime.cuda's model against runtime.model.Qwen2Model: on the GPU when there is one, else on the CPU with
the kernels in Triton's interpreter (the model is built where the kernels run: `_dev()`).

The CUDA-only parts (graph capture/replay) run in the `gpu` tests; everything else, including the padded
static-buffer path the graphs capture ("emulate"), runs here on either.
fp32 comparisons use kernel_tolerance.model_tol (the dot rule over the model's matmuls in sequence).
"""
from __future__ import annotations

import pytest
import torch
from kernel_tolerance import model_tol

from runtime.config import ModelConfig
from runtime.cuda import CudaKVCache, build_cuda_model, prepare_tensor
from runtime.kv_cache import BranchKV, KVCache
from runtime.model import Qwen2Model, random_gguf_tensors
from runtime.prefix_store import PrefixStore, store_fingerprint
from runtime.weights import prepare_tensor as cpu_prepare

def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _close(got, want, config, precision="ieee"):
    tol = model_tol(config, precision)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * float(want.abs().max()))


TINY = ModelConfig(arch="qwen2", vocab_size=300, hidden_size=128, intermediate_size=256, num_layers=2,
                   num_heads=4, num_kv_heads=2, head_dim=32, context_length=4096)


def _tensors(config, fmt):
    out = {}
    for name, (w, ggml_type) in random_gguf_tensors(config, seed=0).items():
        ggml_type = "Q8_0" if ggml_type == "Q5_0" else ggml_type  # random weights are no Q5_0: skip its code search
        out.update(prepare_tensor(name, w, ggml_type) if fmt == "cuda" else cpu_prepare(name, w, ggml_type, fmt=fmt))
    return out


@pytest.fixture(scope="module")
def reference():
    return Qwen2Model.from_tensors(TINY, _tensors(TINY, "fp32"))


@pytest.fixture(scope="module")
def fp32_tensors():
    return _tensors(TINY, "fp32")


def _run(model, cache, tokens, steps):
    """Prefill `tokens`, then feed `steps` (lists of tokens) one block at a time; logits of every call."""
    outs = [model.forward(torch.tensor(tokens), torch.arange(len(tokens)), cache)]
    for block in steps:
        n = cache.length
        outs.append(model.forward(torch.tensor(block), torch.arange(n, n + len(block)), cache))
    return outs


PROMPT = [5, 17, 200, 3, 99, 42, 7, 250, 1, 64, 128, 11, 13]  # 13: odd
STEPS = [[8], [9, 10, 11], [12], [20, 21, 22, 23, 24, 25, 26, 27], [30]]


@pytest.mark.parametrize("graphs,dense", [(False, True), ("emulate", True), ("emulate", False)])
def test_fp32_kernels_match_reference_model(reference, fp32_tensors, graphs, dense):
    model = build_cuda_model(TINY, fp32_tensors, device=_dev(), dtype=torch.float32, graphs=graphs)
    model.dense_kernel = dense  # False: cuBLAS (torch) for the small-T projections, bench/gpu.py's comparison
    want = _run(reference, KVCache(TINY), PROMPT, STEPS)
    cache = model.new_cache(capacity=16)  # grows during the run (graphs dropped and re-made)
    assert cache.k.device.type == _dev()
    got = _run(model, cache, PROMPT, STEPS)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == torch.float32 and g.device.type == "cpu"  # logits come back
        _close(g, w, TINY)
    assert cache.tokens == PROMPT + sum(STEPS, [])
    if graphs:  # T=3 ran padded to 4; sizes 1, 4, 8 captured, re-captured after growth past 16 and 32
        assert model.graph_captures >= 3


def test_eager_torch_baseline_matches_reference(reference, fp32_tensors):
    model = build_cuda_model(TINY, fp32_tensors, device=_dev(), dtype=torch.float32, use_triton=False)
    for g, w in zip(_run(model, model.new_cache(), PROMPT, STEPS), _run(reference, KVCache(TINY), PROMPT, STEPS)):
        _close(g, w, TINY)


def test_last_only_and_padded_verify_block(reference, fp32_tensors):
    model = build_cuda_model(TINY, fp32_tensors, device=_dev(), dtype=torch.float32, graphs="emulate")
    cache, ref_cache = model.new_cache(), KVCache(TINY)
    model.forward(torch.tensor(PROMPT), torch.arange(13), cache)
    reference.forward(torch.tensor(PROMPT), torch.arange(13), ref_cache)
    block = [3, 4, 5, 6, 7]  # 5 -> the 8-row graph, last real row is row 4
    got = model.forward(torch.tensor(block), torch.arange(13, 18), cache, last_only=True)
    want = reference.forward(torch.tensor(block), torch.arange(13, 18), ref_cache, last_only=True)
    assert got.shape == (1, TINY.vocab_size)
    _close(got, want, TINY)
    # The pad rows wrote K/V past the new length; the cache commits only the 5 real tokens and the next
    # step overwrites the pad slots.
    assert cache.length == 18
    nxt = model.forward(torch.tensor([9]), torch.tensor([18]), cache)
    _close(nxt, reference.forward(torch.tensor([9]), torch.tensor([18]), ref_cache), TINY)


def test_bf16_weights_close_to_fp32(reference):
    """The CUDA configuration (bf16 weights via this module's prepare_tensor, bf16 activations, fp32 residual)."""
    model = build_cuda_model(TINY, _tensors(TINY, "cuda"), device=_dev(), dtype=torch.bfloat16, graphs="emulate")
    got = _run(model, model.new_cache(), PROMPT, STEPS[:3])
    want = _run(reference, KVCache(TINY), PROMPT, STEPS[:3])
    for g, w in zip(got, want):
        err = (g - w).abs().max() / w.abs().max()
        assert err < 0.05, float(err)
        assert (g.argmax(-1) == w.argmax(-1)).float().mean() >= 0.8


@pytest.fixture(scope="module")
def quant_tensors():
    return _tensors(TINY, "quant")


@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_quantized_weights_from_cpu_formats(weights, quant_tensors):
    """Quantized CPU-format tensors (int8 rows, exact Q4_K int4) -> runtime.kernels.quant on the device.

    The reference is the CPU path on the same weights, which rounds activations to 8-bit blocks
    (runtime.weights.block_quantize): its error, not the kernels', sets the 2% bound here."""
    quant = quant_tensors
    ref = Qwen2Model.from_tensors(TINY, quant)  # the same quantized weights on the CPU path
    model = build_cuda_model(TINY, quant, device=_dev(), dtype=torch.float32, weights=weights, graphs=False)
    kinds = {blk.ffn_down.kind for blk in model.blocks} | {model.blocks[0].qkv.kind}
    assert kinds == ({"int4", "int8"} if weights == "int4" else {"int8"})  # ffn_down is an exact Q4_K
    got = _run(model, model.new_cache(), PROMPT[:5], STEPS[1:2])  # the interpreter is slow on int8 tiles: short
    want = _run(ref, KVCache(TINY), PROMPT[:5], STEPS[1:2])
    for g, w in zip(got, want):
        err = (g - w).abs().max() / w.abs().max()
        assert err < 0.02, float(err)


def test_cache_fork_save_load(tmp_path, fp32_tensors, reference):
    model = build_cuda_model(TINY, fp32_tensors, device=_dev(), dtype=torch.float32, graphs=False)
    cache = model.new_cache(model_id="m")
    model.forward(torch.tensor(PROMPT), torch.arange(13), cache)
    child = cache.fork(7)
    assert isinstance(child, CudaKVCache) and child.tokens == PROMPT[:7]
    assert torch.equal(child.k[:, :, :7], cache.k[:, :, :7])
    cache.save(tmp_path / "kv.bin")
    back = CudaKVCache.load(tmp_path / "kv.bin", TINY, model_id="m", device=_dev())
    assert back.k.device == cache.k.device
    assert back.tokens == PROMPT and back.dtype == torch.float32
    assert torch.equal(back.v[:, :, :13], cache.v[:, :, :13])
    # a continued decode from the loaded cache equals one from the original
    a = model.forward(torch.tensor([3]), torch.tensor([13]), cache)
    b = model.forward(torch.tensor([3]), torch.tensor([13]), back)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_qwen3_qk_norm_and_interleaved_rope():
    cfg = ModelConfig(arch="qwen3", vocab_size=300, hidden_size=64, intermediate_size=128, num_layers=1, num_heads=4,
                      num_kv_heads=1, head_dim=16, context_length=512, qkv_bias=False, qk_norm=True, rope_interleaved=True)
    t = _tensors(cfg, "fp32")
    ref = Qwen2Model.from_tensors(cfg, t)
    model = build_cuda_model(cfg, t, device=_dev(), dtype=torch.float32, graphs="emulate")
    for g, w in zip(_run(model, model.new_cache(), PROMPT, STEPS[:2]), _run(ref, KVCache(cfg), PROMPT, STEPS[:2])):
        _close(g, w, cfg)


def test_branches_decode_together_like_the_reference(reference, fp32_tensors):
    """forward_branches (LocalEngine.sample's batched step): B branches over one prefix, K/V on the model's device."""
    model = build_cuda_model(TINY, fp32_tensors, device=_dev(), dtype=torch.float32, graphs="emulate")
    cache, ref_cache = model.new_cache(), KVCache(TINY)
    model.forward(torch.tensor(PROMPT), torch.arange(13), cache)
    reference.forward(torch.tensor(PROMPT), torch.arange(13), ref_cache)
    kv, ref_kv = BranchKV(cache, 3, capacity=2), BranchKV(ref_cache, 3, capacity=2)  # grows on the 3rd step
    assert kv.k.device.type == _dev()
    for feed in ([1, 2, 3], [4, 5, 6], [7, 8, 9]):
        _close(model.forward_branches(torch.tensor(feed), kv), reference.forward_branches(torch.tensor(feed), ref_kv), TINY)
    kv.select([2, 0])
    ref_kv.select([2, 0])
    _close(model.forward_branches(torch.tensor([10, 11]), kv), reference.forward_branches(torch.tensor([10, 11]), ref_kv), TINY)
    # a branch kept: its K/V appended to the session's cache, then a plain decode continues from it
    tokens, k, v = kv.branch(0)
    cache.append_kv(tokens, k, v)
    ref_tokens, rk, rv = ref_kv.branch(0)
    ref_cache.append_kv(ref_tokens, rk, rv)
    n = cache.length
    _close(model.forward(torch.tensor([12]), torch.tensor([n]), cache),
           reference.forward(torch.tensor([12]), torch.tensor([n]), ref_cache), TINY)


def test_prefix_store_round_trip_on_the_device(tmp_path, fp32_tensors):
    """The prefix store writes a device cache and loads it back onto the device (the model's load_cache)."""
    model = build_cuda_model(TINY, fp32_tensors, device=_dev(), dtype=torch.float32, graphs=False)
    store = PrefixStore(tmp_path, "m", TINY, fingerprint=store_fingerprint(model), budget_bytes=1 << 30,
                        load_cache=model.load_cache)
    cache = model.new_cache(model_id="m")
    prompt = list(range(1, 40))
    model.forward(torch.tensor(prompt), torch.arange(len(prompt)), cache)
    assert store.store(cache.fork()) is not None
    match = store.lookup(prompt[:30] + [7, 7])
    assert match is not None and match.common == 30
    back = store.load(match)
    assert isinstance(back, CudaKVCache) and back.k.device == cache.k.device and back.tokens == prompt[:30]
    a = model.forward(torch.tensor([5]), torch.tensor([30]), back)
    cache.truncate(30)
    b = model.forward(torch.tensor([5]), torch.tensor([30]), cache)
    torch.testing.assert_close(a, b, rtol=0, atol=0)

"""CUDA-only checks (marked gpu; skipped without CUDA): compiled kernels in bf16, real CUDA graphs, and verify
rows bit-equal to decode steps (lossless greedy speculation). Tolerances from kernel_tolerance's rule."""
from __future__ import annotations

import pytest
import torch
from kernel_tolerance import assert_within, int4_magnitudes, attention_bound, matmul_bound, model_tol

from runtime.config import ModelConfig
from runtime.cuda import build_cuda_model, prepare_tensor
from runtime.kernels.attention import DOT_PRECISION, attention_ref, verify_attention
from runtime.kernels.quant import int4_matmul, int4_matmul_ref, pack_int4, quantize_int4
from runtime.model import random_gguf_tensors

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CFG = ModelConfig(arch="qwen2", vocab_size=1000, hidden_size=896, intermediate_size=1024, num_layers=2,
                  num_heads=14, num_kv_heads=2, head_dim=64, context_length=8192)


def test_bf16_attention_compiled_long_context():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(8, 14, 64, generator=g).bfloat16().cuda()
    k = torch.randn(2, 8192, 64, generator=g).bfloat16().cuda()
    v = torch.randn(2, 8192, 64, generator=g).bfloat16().cuda()
    got = verify_attention(q, k, v, 7001)
    assert_within(got, attention_ref(q, k, v, 7001), attention_bound(q, k, v, 7001, DOT_PRECISION), "bf16 L=7001")


def test_bf16_int4_matmul_compiled():
    codes, scale, zero = quantize_int4(torch.randn(4864, 896) * 0.05)
    p, s, z = pack_int4(codes).cuda(), scale.cuda(), zero.cuda()
    x = torch.randn(8, 896).bfloat16().cuda()
    # bf16 x in "tf32": exact products, so the ieee rule; the bf16 output rounding is the rule's eps term
    assert_within(int4_matmul(x, p, s, z), int4_matmul_ref(x, p, s, z), matmul_bound(x, int4_magnitudes(p, s, z), "ieee"),
                  "int4 bf16 compiled")


def test_cuda_graphs_match_eager_and_torch_baseline():
    tensors = {}
    for name, (w, t) in random_gguf_tensors(CFG, seed=0).items():
        tensors.update(prepare_tensor(name, w, t))
    models = {m: build_cuda_model(CFG, tensors, use_triton=m != "torch", graphs=m == "graphs")
              for m in ("graphs", "eager", "torch")}
    prompt = list(range(1, 300))
    outs = {}
    for m, model in models.items():
        cache = model.new_cache(capacity=256)  # grows at 300+ tokens: graphs are re-captured
        res = [model.forward(torch.tensor(prompt), torch.arange(len(prompt)), cache, last_only=True)]
        for block in ([5], [6, 7], [8, 9, 10], [11] * 8, [12] * 16, [13]):
            n = cache.length
            res.append(model.forward(torch.tensor(block), torch.arange(n, n + len(block)), cache))
        outs[m] = res
    tol = model_tol(CFG, "bf16")  # bf16 activations: each matmul's input rounded to bf16, on both sides
    for a, b, c in zip(outs["graphs"], outs["eager"], outs["torch"]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)  # the same kernels, captured or not
        torch.testing.assert_close(a, c, rtol=tol, atol=tol * float(c.abs().max()))
    assert models["graphs"].graph_captures >= 5


def test_verify_rows_equal_decode_steps_bit_for_bit():
    """The model's verify block (T = 8, graphs) gives row t exactly the logits of the t-th decode step: what
    makes greedy speculative decoding token-identical to plain decoding."""
    tensors = {}
    for name, (w, t) in random_gguf_tensors(CFG, seed=1).items():
        tensors.update(prepare_tensor(name, w, t))
    model = build_cuda_model(CFG, tensors)
    prompt, block = list(range(1, 200)), [7, 8, 9, 10, 11, 12, 13, 14]
    a, b = model.new_cache(capacity=256), model.new_cache(capacity=256)
    for c in (a, b):
        model.forward(torch.tensor(prompt), torch.arange(len(prompt)), c, last_only=True)
    rows = model.forward(torch.tensor(block), torch.arange(199, 207), a)
    for t, tok in enumerate(block):
        one = model.forward(torch.tensor([tok]), torch.tensor([199 + t]), b)
        assert torch.equal(rows[t : t + 1], one), f"row {t}: max |diff| {float((rows[t] - one[0]).abs().max()):.3e}"

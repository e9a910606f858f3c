"""CUDA-only checks (marked gpu; skipped without CUDA): compiled kernels in bf16 and real CUDA graphs."""
from __future__ import annotations

import pytest
import torch

from kernels.attention import attention_ref, verify_attention
from kernels.quant import int4_matmul, int4_matmul_ref, pack_int4, quantize_int4
from runtime.config import ModelConfig
from runtime.cuda import build_cuda_model, prepare_tensor
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
    torch.testing.assert_close(got.float(), attention_ref(q, k, v, 7001).float(), rtol=2e-2, atol=2e-2)


def test_bf16_int4_matmul_compiled():
    codes, scale, zero = quantize_int4(torch.randn(4864, 896) * 0.05)
    p, s, z = pack_int4(codes).cuda(), scale.cuda(), zero.cuda()
    x = torch.randn(8, 896).bfloat16().cuda()
    torch.testing.assert_close(int4_matmul(x, p, s, z).float(), int4_matmul_ref(x, p, s, z).float(), rtol=3e-2, atol=3e-2)


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
    for a, b, c in zip(outs["graphs"], outs["eager"], outs["torch"]):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)
        torch.testing.assert_close(a, c, rtol=5e-2, atol=5e-2)
    assert models["graphs"].graph_captures >= 5

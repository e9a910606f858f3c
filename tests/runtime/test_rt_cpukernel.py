"""runtime/cpu_kernels: the small-M C kernel against torch references, its fallback, and Linear/model wiring."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from runtime import cpu_kernels, weights
from runtime.config import ModelConfig
from runtime.kv_cache import KVCache
from runtime.model import Qwen2Model, random_q4k, rms_norm
from runtime.weights import (Int4Linear, Int8Linear, block_quantize, fuse_linears, load_linear, pack_q4i, pack_q5i, pack_q8i,
                             prepare_tensor, q5_0_codes, quantize_int8)

needs_cc = pytest.mark.skipif(not (shutil.which("gcc") or shutil.which("cc")), reason="no C compiler")


def _cpu_has(*flags: str) -> bool:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return all(f in line.split() for f in flags)


# Every code path this machine can run: native (AVX-512 VNNI here), AVX2+FMA (what CI and most users have),
# and the portable C path.
MARCHES = ["native"] + (["haswell"] if _cpu_has("avx2", "fma", "f16c") else []) + ["x86-64"]


pytestmark = pytest.mark.usefixtures("fresh_kernel_state")


def exact_q5_0(out_f: int, in_f: int, seed: int) -> torch.Tensor:
    """A weight that is exactly a Q5_0 tensor: random values quantized and dequantized by gguf."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    w = np.random.default_rng(seed).standard_normal((out_f, in_f)).astype(np.float32) * 0.05
    w[:, 3] *= 20  # an outlier column, as real weights have
    return torch.from_numpy(np.ascontiguousarray(dequantize(quantize(w, GGMLQuantizationType.Q5_0), GGMLQuantizationType.Q5_0)))


def act_quant_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's activation rule in torch: per block of 32, d = max|x| / 127, q = round(x * (127 / max|x|)).

    Returns q (M, K) and each element's block step d (M, K), float64."""
    M, K = x.shape
    xb = x.reshape(M, K // 32, 32)
    amax = xb.abs().amax(-1, keepdim=True)
    q = torch.round(xb * torch.where(amax > 0, 127 / amax, torch.zeros_like(amax))).clamp(-127, 127)
    d = (amax / 127).expand(M, K // 32, 32)
    return q.reshape(M, K).double(), d.reshape(M, K).double()


def test_block_quantize_is_the_kernels_rule():
    x = torch.randn(5, 96, generator=torch.Generator().manual_seed(0)) * 3
    x[1, 32:64] = 0.0  # an all-zero block
    q, d = act_quant_reference(x)
    assert torch.equal(block_quantize(x), (q.float() * d.float()))
    assert torch.equal(block_quantize(x)[1, 32:64], torch.zeros(32))
    assert float((block_quantize(x) - x).abs().max()) <= float(d.max()) / 2 * 1.0001


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """float64 (activations as the kernel rounds them) @ w.T (w: the exact fp32 weight)."""
    q, d = act_quant_reference(x)
    return (q * d @ w.double().t()).float()


def random_case(fmt: int, N: int, K: int, seed: int):
    """(weight data, row scales, exact fp32 weight) for one kernel format."""
    g = torch.Generator().manual_seed(seed)
    if fmt == cpu_kernels.FMT_Q8I:
        q, s = quantize_int8(torch.randn(N, K, generator=g) * 0.05)
        return pack_q8i(q), s, q.float() * s[:, None]
    if fmt == cpu_kernels.FMT_Q5I:
        w = exact_q5_0(N, K, seed)
        u, d = q5_0_codes(w)
        return pack_q5i(u, d), None, w
    u = torch.randint(0, 16, (N, K), generator=g, dtype=torch.uint8)
    scale = torch.rand(N, K // 32, generator=g) * 0.01
    lo = -torch.rand(N, K // 32, generator=g) * 0.08
    w = (lo[..., None] + scale[..., None] * u.reshape(N, -1, 32).float()).reshape(N, K)
    return pack_q4i(u, scale, lo), None, w


@needs_cc
def test_kernel_builds_and_is_cached():
    k = cpu_kernels.kernel()
    assert k is not None and k.path.exists() and k.path.parent.name == "kernels"
    assert cpu_kernels.kernel() is k
    if _cpu_has("avx512_vnni", "avx512vl", "avx512bw"):
        assert k.isa == 2
    elif _cpu_has("avx2", "fma", "f16c"):
        assert k.isa == 1


@needs_cc
@pytest.mark.parametrize("march", MARCHES)
@pytest.mark.parametrize("fmt", [cpu_kernels.FMT_Q8I, cpu_kernels.FMT_Q5I, cpu_kernels.FMT_Q4I])
def test_kernel_matches_reference_and_rows_are_independent(march, fmt):
    k = cpu_kernels.kernel(march)
    assert k is not None
    for N, K, seed in ((1, 32, 0), (7, 96, 1), (69, 896, 2), (130, 4864 // 4, 3)):
        data, scale, w = random_case(fmt, N, K, seed)
        plan = k.plan([(fmt, data, scale, 0, N)])
        x = torch.randn(16, K, generator=torch.Generator().manual_seed(seed + 10)) * 2
        x[:, 5] = 40.0  # outlier channel
        x[3] = 0.0  # an all-zero row
        full = k.linear(x, plan, N, None)
        ref = reference(x, w)
        torch.testing.assert_close(full, ref, atol=1e-5 * float(ref.abs().max()) + 1e-6, rtol=1e-4)
        # against unquantized activations: off by at most the activation rounding, half a block step per element
        _, d = act_quant_reference(x)
        bound = (d / 2) @ w.double().abs().t()
        assert ((full - x @ w.t()).abs() <= bound.float() * 1.01 + 1e-5).all()
        for M in range(1, 17):  # rows are computed independently of M, to the last bit
            assert torch.equal(k.linear(x[:M].contiguous(), plan, N, None), full[:M]), (N, K, M)
        assert torch.equal(k.linear(x[9:10].contiguous(), plan, N, None), full[9:10])


@needs_cc
def test_kernel_segments_and_bias_fill_their_columns():
    k = cpu_kernels.kernel()
    K = 256
    cases = [random_case(f, n, K, s) for f, n, s in ((1, 64, 0), (0, 40, 1), (2, 24, 2))]
    segs, col = [], 0
    for f, (data, scale, w) in zip((1, 0, 2), cases):
        segs.append((f, data, scale, col, w.shape[0]))
        col += w.shape[0]
    bias = torch.randn(col)
    x = torch.randn(5, K)
    y = k.linear(x, k.plan(segs), col, bias)
    ref = torch.cat([reference(x, c[2]) for c in cases], 1) + bias
    torch.testing.assert_close(y, ref, atol=2e-5 * float(ref.abs().max()), rtol=1e-4)


def test_q5_0_codes_are_exact_and_reject_other_weights():
    w = exact_q5_0(48, 160, 0)
    u, d = q5_0_codes(w)
    assert u.dtype == torch.uint8 and int(u.max()) <= 31 and d.dtype == torch.float16
    rec = (u.float() - 16).reshape(48, -1, 32) * d.float()[..., None]
    assert torch.equal(rec.reshape(48, 160), w)
    assert q5_0_codes(torch.randn(16, 64)) is None
    stored = prepare_tensor("blk.0.attn_q.weight", w, "Q5_0")
    assert sorted(stored) == ["blk.0.attn_q.weight.q5i", "blk.0.attn_q.weight.q8", "blk.0.attn_q.weight.q8_scale"]
    assert "token_embd.weight.q5i" not in prepare_tensor("token_embd.weight", w, "Q5_0")


def _linears():
    g = torch.Generator().manual_seed(0)
    K = 320
    q5 = load_linear(prepare_tensor("a", exact_q5_0(96, K, 1), "Q5_0"), "a", bias=torch.randn(96, generator=g))
    q5.exact_weight = exact_q5_0(96, K, 1)
    i8 = load_linear(prepare_tensor("b", torch.randn(32, K, generator=g), "Q8_0"), "b", bias=torch.randn(32, generator=g))
    i4 = load_linear(prepare_tensor("c", random_q4k(128, 512, g), "Q4_K"), "c")
    return q5, i8, i4


@needs_cc
def test_linears_use_the_kernel_and_stay_close_to_torch():
    q5, i8, i4 = _linears()
    q5_weight = q5.exact_weight
    assert isinstance(q5, Int8Linear) and q5.q5_rows and isinstance(i8, Int8Linear) and not i8.q5_rows
    assert isinstance(i4, Int4Linear)
    fused = fuse_linears([q5, i8])[0]  # mixed q5i and int8 rows: one call, two segments
    assert [s[0] for s in fused.kernel_segments()] == [cpu_kernels.FMT_Q5I, cpu_kernels.FMT_Q8I]
    lins = [q5, i8, i4, fused]
    xs = {lin: torch.randn(16, lin.in_features, generator=torch.Generator().manual_seed(3)) for lin in lins}
    ours = {lin: lin.matmul(xs[lin]) for lin in lins}
    assert all(lin._plan not in (None, weights._NO_PLAN) for lin in lins)
    torch.testing.assert_close(ours[fused], torch.cat([ours[q5], ours[i8]], 1), atol=0, rtol=0)
    for lin in lins:  # every M uses the same per-row math
        x = xs[lin]
        assert torch.equal(torch.cat([lin.matmul(x[i:i + 1]) for i in range(16)]), ours[lin])
    u = weights.int4pack_codes(i4.packed, i4.out_features, i4.in_features).float().reshape(i4.out_features, -1, 32)
    sz = i4.scales_zeros  # the kernel's int4 blocks carry the exact fp32 scales
    i4_w = ((u - 8) * sz[..., 0].t()[..., None] + sz[..., 1].t()[..., None]).reshape(i4.out_features, -1)
    torch.testing.assert_close(i4.exact_weight(), i4_w, atol=1e-7, rtol=0)
    torch.testing.assert_close(i4.exact_weight(), i4.dequantize(), atol=1e-6, rtol=0)
    exact_w = {q5: q5_weight, i8: i8.dequantize(), i4: i4_w}
    exact_w[fused] = torch.cat([q5_weight, exact_w[i8]])
    cpu_kernels.configure(enabled=False)
    weights.reset_kernel_state(lins)
    for lin in lins:
        torch_y = lin.matmul(xs[lin])
        assert lin._plan is weights._NO_PLAN
        exact = xs[lin] @ exact_w[lin].t() + (lin.bias if lin.bias is not None else 0)
        scale = float(exact.abs().max())
        ours_err = float((ours[lin] - exact).abs().max())
        assert ours_err < 1e-2 * scale, (lin, ours_err, scale)
        # ours differs from exact math by the int8 activation rounding only (the q5 rows are exact Q5_0 codes)
        ref = reference(xs[lin], exact_w[lin]) + (lin.bias if lin.bias is not None else 0)
        torch.testing.assert_close(ours[lin], ref, atol=2e-5 * scale, rtol=1e-4)


@needs_cc
def test_any_m_runs_in_the_kernel_in_pieces_and_the_torch_path_only_without_it():
    q5, i8, i4 = _linears()
    for lin in (q5, i8, i4):
        x = torch.randn(300, lin.in_features, generator=torch.Generator().manual_seed(4))
        y = lin.matmul(x)  # 300 > 256 rows per call: two pieces, each row computed as alone
        assert lin._plan not in (None, weights._NO_PLAN)
        assert torch.equal(y[7:8], lin.matmul(x[7:8])) and torch.equal(y[290:], lin.matmul(x[290:]))
        cpu_kernels.configure(max_m=8)
        weights.reset_kernel_state([lin])
        assert torch.equal(lin.matmul(x), y)  # pieces of 8: the same bits
        cpu_kernels.configure(enabled=False, max_m=8)
        weights.reset_kernel_state([lin])
        torch_y = lin.matmul(x)  # torch's path (its accuracy: test_linears_use_the_kernel_and_stay_close_to_torch)
        assert lin._plan is weights._NO_PLAN and torch_y.shape == y.shape and not torch.equal(torch_y, y)
        cpu_kernels.configure()
        weights.reset_kernel_state([lin])


@needs_cc
def test_int4_kernel_off_runs_torch_int4():
    _, _, i4 = _linears()
    x = torch.randn(40, i4.in_features, generator=torch.Generator().manual_seed(4))
    cpu_kernels.configure(enabled=False)
    weights.reset_kernel_state([i4])
    ref = torch.ops.aten._weight_int4pack_mm_for_cpu(block_quantize(x).to(torch.bfloat16), i4.packed, 32, i4.sz_bf16).float()
    assert torch.equal(i4.matmul(x), ref) and torch.equal(i4.matmul(x[:2]), ref[:2])


def test_fallback_when_off_or_no_compiler(monkeypatch, tmp_path):
    cpu_kernels.configure(enabled=False)
    weights.reset_kernel_state()
    assert cpu_kernels.kernel() is None
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    cpu_kernels.configure(cache_dir=tmp_path / "cache")  # nothing prebuilt there
    weights.reset_kernel_state()
    assert cpu_kernels.kernel() is None
    q5, i8, i4 = _linears()
    for lin in (q5, i8, i4):
        x = torch.randn(2, lin.in_features)
        y = lin.matmul(x)
        assert lin.kernel_matmul(x) is None and lin._plan is weights._NO_PLAN and y.shape == (2, lin.out_features)


@needs_cc
def test_kernel_build_is_cached_in_the_cache_dir(tmp_path):
    cpu_kernels.configure(cache_dir=tmp_path)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "ck-native-0123456789abcdef01234567.so").write_bytes(b"an older build")
    (tmp_path / "kernels" / "ck-haswell-0123456789abcdef01234567.so").write_bytes(b"another march's")
    weights.reset_kernel_state()
    k = cpu_kernels.kernel()
    assert k is not None and k.path.parent == tmp_path / "kernels"
    (tmp_path / "kernels" / "ck-haswell-0123456789abcdef01234567.so").unlink()  # kept: not this march's
    assert [p.name for p in (tmp_path / "kernels").iterdir()] == [k.path.name]  # no temp files left
    weights.reset_kernel_state()
    assert cpu_kernels.kernel().path == k.path


@needs_cc
@pytest.mark.parametrize("march", MARCHES)
def test_attention_matches_sdpa_and_rows_equal_single_calls(march):
    k = cpu_kernels.kernel(march)
    g = torch.Generator().manual_seed(0)
    H, n_kv, d, cap = 6, 2, 64, 96
    K, V = torch.randn(n_kv, cap, d, generator=g), torch.randn(n_kv, cap, d, generator=g)
    K[:, 5] *= 30  # a key that dominates its rows' softmax
    for start, T in ((0, 1), (0, 7), (3, 1), (40, 9), (80, 16)):
        S = start + T
        q = torch.randn(T, H + 2, d, generator=g)[:, :H] * 2  # strided rows, as the model's q|k|v view
        ours = k.attention(q, K[:, :S], V[:, :S], start)
        mask = torch.arange(S)[None, :] <= torch.arange(start, S)[:, None]
        ref = torch.nn.functional.scaled_dot_product_attention(q.transpose(0, 1)[None], K[None, :, :S], V[None, :, :S],
                                                               attn_mask=mask, enable_gqa=True)
        torch.testing.assert_close(ours, ref.view(H, T, d).transpose(0, 1).reshape(T, H * d), atol=2e-5, rtol=1e-5)
        for i in range(T):  # row i alone, with only its own keys in view: the same bits
            assert torch.equal(k.attention(q[i:i + 1], K[:, :start + i + 1], V[:, :start + i + 1], start + i), ours[i:i + 1])


TINY = ModelConfig(arch="qwen2", vocab_size=300, hidden_size=64, intermediate_size=256, num_layers=2, num_heads=4,
                   num_kv_heads=2, head_dim=16, rms_eps=1e-6, rope_theta=10000.0, context_length=256,
                   tie_embeddings=True, qkv_bias=True)


@needs_cc
def test_tiny_model_verify_rows_equal_single_decodes():
    model = Qwen2Model.random(TINY, seed=0)
    toks = torch.randint(0, TINY.vocab_size, (28,), generator=torch.Generator().manual_seed(1))
    a, b = KVCache(TINY), KVCache(TINY)
    for c in (a, b):
        model.forward(toks[:20], torch.arange(20), c)  # prefill
    verify = model.forward(toks[20:28], torch.arange(20, 28), a)  # M = 8: the kernel
    singles = torch.cat([model.forward(toks[i:i + 1], torch.arange(i, i + 1), b) for i in range(20, 28)])
    # The kernel's matmul and attention rows are computed alone (tests above), and norms, RoPE and SiLU are per
    # row: a verify pass gives single decodes' logits bit for bit, so greedy speculation cannot change a token.
    # Without AVX-512 or AVX2 the attention is torch's SDPA (model.attention), whose T = 1 and T > 1 paths sum
    # differently.
    if cpu_kernels.kernel().isa >= 1:
        assert torch.equal(verify, singles)
    else:
        assert torch.equal(verify.argmax(-1), singles.argmax(-1))
        torch.testing.assert_close(verify, singles, atol=5e-3, rtol=0)


@needs_cc
def test_avx2_and_avx512_builds_give_the_same_bits():
    """The AVX2 path mirrors the AVX-512 one step for step (integer dots are exact, the fp32 steps run in the same
    order): a KV cache or a greedy run does not depend on which of the two a machine has."""
    wide = cpu_kernels.kernel()
    if wide is None or wide.isa != 2 or "haswell" not in MARCHES:
        pytest.skip("needs an AVX-512 VNNI machine (the AVX2 build runs there too)")
    narrow = cpu_kernels.kernel("haswell")
    assert narrow.isa == 1
    g = torch.Generator().manual_seed(3)
    for fmt in (cpu_kernels.FMT_Q8I, cpu_kernels.FMT_Q5I, cpu_kernels.FMT_Q4I):
        data, scale, _ = random_case(fmt, 69, 896, 4)
        x = torch.randn(11, 896, generator=g)
        outs = [k.linear(x, k.plan([(fmt, data, scale, 0, 69)]), 69, None) for k in (wide, narrow)]
        assert torch.equal(*outs), fmt
    K, V = torch.randn(2, 80, 64, generator=g), torch.randn(2, 80, 64, generator=g)
    for start, T in ((0, 1), (37, 9), (64, 16)):
        q = torch.randn(T, 6, 64, generator=g)
        assert torch.equal(wide.attention(q, K, V, start), narrow.attention(q, K, V, start)), (start, T)


@needs_cc
@pytest.mark.parametrize("march", MARCHES)
def test_rms_norm_matches_torch_and_rows_equal_single_calls(march):
    k = cpu_kernels.kernel(march)
    g = torch.Generator().manual_seed(5)
    for M, K in ((1, 64), (9, 1536), (3, 100)):  # 100: a tail past the last 8 values
        x = torch.randn(M, K + 3, generator=g)[:, :K] * 3  # strided rows, as a view of a wider tensor
        w = torch.randn(K, generator=g)
        ours = k.rms_norm(x, w, 1e-6)
        torch.testing.assert_close(ours, torch.nn.functional.rms_norm(x, (K,), w, 1e-6), atol=1e-5, rtol=1e-5)
        for i in range(M):
            assert torch.equal(k.rms_norm(x[i:i + 1], w, 1e-6), ours[i:i + 1])


def test_model_rms_norm_rejects_a_weight_of_the_wrong_size():
    """The kernel reads K weights: a short one goes to torch, which refuses it, instead of past its end."""
    with pytest.raises(RuntimeError):
        rms_norm(torch.randn(2, 64), torch.ones(3), 1e-6)

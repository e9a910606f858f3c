"""Weight-only int8 / int4-group-32 matmul kernels vs their torch references (decode and verify sizes).

Tolerances: kernel_tolerance.matmul_bound from the precision the kernels use (runtime.kernels.dot_precision: "ieee"
for fp32 activations, "tf32" for bf16 ones, which it holds exactly) and K (the rule is in that file). The magnitudes are those of the dot the kernel takes: |x| . |q| scale for int8, and
|x| . (|code - 8| s + |z|) for int4 (it sums s x.(code - 8) and z sum(x) per group).
"""
from __future__ import annotations

import pytest
import torch
from kernel_tolerance import assert_within, int4_magnitudes, matmul_bound

from runtime.kernels import dot_precision
from runtime.kernels.quant import (dequantize_int4, int4_matmul, int4_matmul_ref, int8_matmul,
                           int8_matmul_ref, pack_int4, quantize_int4, quantize_int8)


def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _w(N, K, seed):
    return torch.randn(N, K, generator=torch.Generator().manual_seed(seed)) * 0.05


def _int8_bound(x, q, scale, bias=None):
    return matmul_bound(x, q.float().abs() * scale.float()[:, None], dot_precision(x.dtype), bias)


def _int4_bound(x, packed, scale, zero, bias=None):
    return matmul_bound(x, int4_magnitudes(packed, scale, zero), dot_precision(x.dtype), bias)


@pytest.mark.parametrize("M,N,K,split_k", [(1, 200, 320, None), (8, 96, 136, 1), (3, 64, 256, 2), (17, 50, 70, None)])
@pytest.mark.parametrize("bias", [False, True])
def test_int8_matmul_matches_reference(M, N, K, split_k, bias):
    g = torch.Generator().manual_seed(M * N + K)
    q, scale = quantize_int8(_w(N, K, K))
    x = torch.randn(M, K, generator=g)
    b = torch.randn(N, generator=g) if bias else None
    q, scale, x = q.to(_dev()), scale.to(_dev()), x.to(_dev())
    b = b.to(_dev()) if b is not None else None
    got = int8_matmul(x, q, scale, b, split_k=split_k)
    want = int8_matmul_ref(x, q, scale, b)
    assert got.shape == (M, N)
    assert_within(got, want, _int8_bound(x, q, scale, b), f"int8 {M}x{N}x{K}")


def test_int8_matmul_bf16_activations():
    q, scale = quantize_int8(_w(128, 192, 1))
    x = torch.randn(4, 192).to(torch.bfloat16)
    got = int8_matmul(x.to(_dev()), q.to(_dev()), scale.to(_dev()))
    assert got.dtype == torch.bfloat16
    # bf16 activations are exact in tf32: only accumulation order and the bf16 output rounding remain
    assert_within(got, int8_matmul_ref(x.float(), q, scale), matmul_bound(x, q.float().abs() * scale[:, None], "ieee"),
                  "int8 bf16 activations")


def test_int4_pack_roundtrip_and_quantization_error():
    w = _w(48, 128, 2)
    codes, scale, zero = quantize_int4(w)
    packed = pack_int4(codes)
    assert packed.shape == (48, 64) and packed.dtype == torch.uint8
    deq = dequantize_int4(packed, scale, zero)
    # Each group's values lie on its 16-level grid: error at most half a step.
    step = scale.repeat_interleave(32, dim=1)
    assert float(((deq - w).abs() - step / 2).max()) <= 1e-6
    assert torch.equal(torch.cat([packed & 15, packed >> 4], 1).to(torch.int32), codes)


@pytest.mark.parametrize("M,N,K,split_k", [(1, 200, 256, None), (8, 64, 128, 1), (5, 96, 384, 3), (16, 33, 64, None)])
@pytest.mark.parametrize("bias", [False, True])
def test_int4_matmul_matches_reference(M, N, K, split_k, bias):
    g = torch.Generator().manual_seed(M + N + K)
    codes, scale, zero = quantize_int4(_w(N, K, N))
    packed = pack_int4(codes)
    x = torch.randn(M, K, generator=g)
    b = torch.randn(N, generator=g) if bias else None
    args = [t.to(_dev()) for t in (x, packed, scale, zero)]
    bd = b.to(_dev()) if b is not None else None
    got = int4_matmul(*args, bd, split_k=split_k)
    want = int4_matmul_ref(*args, bd)
    assert_within(got, want, _int4_bound(*args, bd), f"int4 {M}x{N}x{K}")


def test_verify_rows_match_single_rows():
    """k rows in one call equal k one-row calls (weights read once for all rows, no cross-row mixing)."""
    codes, scale, zero = quantize_int4(_w(64, 192, 9))
    packed = pack_int4(codes)
    x = torch.randn(8, 192, generator=torch.Generator().manual_seed(4))
    d = [t.to(_dev()) for t in (packed, scale, zero)]
    block = int4_matmul(x.to(_dev()), *d)
    for m in range(8):
        one = int4_matmul(x[m : m + 1].to(_dev()), *d)
        assert_within(block[m : m + 1], one, _int4_bound(x[m : m + 1], packed, scale, zero), f"row {m}")


def test_int4_bf16_activations_are_exact_in_tf32():
    """The model's case: bf16 x, so tf32 rounds nothing and the ieee rule applies (the bf16 output rounds)."""
    codes, scale, zero = quantize_int4(_w(96, 256, 5))
    packed = pack_int4(codes)
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(6)).to(torch.bfloat16)
    d = [t.to(_dev()) for t in (packed, scale, zero)]
    got = int4_matmul(x.to(_dev()), *d)
    assert got.dtype == torch.bfloat16
    assert_within(got, int4_matmul_ref(x.float(), packed, scale, zero),
                  matmul_bound(x, int4_magnitudes(packed, scale, zero), "ieee"), "int4 bf16")

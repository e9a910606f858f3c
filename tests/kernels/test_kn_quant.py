"""Weight-only int8 / int4-group-32 matmul kernels vs their torch references (decode and verify sizes)."""
from __future__ import annotations

import pytest
import torch

from kernels.quant import (dequantize_int4, int4_matmul, int4_matmul_ref, int8_matmul, int8_matmul_ref, pack_int4,
                           quantize_int4, quantize_int8)


def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _w(N, K, seed):
    return torch.randn(N, K, generator=torch.Generator().manual_seed(seed)) * 0.05


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
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_int8_matmul_bf16_activations():
    q, scale = quantize_int8(_w(128, 192, 1))
    x = torch.randn(4, 192).to(torch.bfloat16)
    got = int8_matmul(x.to(_dev()), q.to(_dev()), scale.to(_dev()))
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), int8_matmul_ref(x.float(), q, scale), rtol=2e-2, atol=2e-2)


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
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_verify_rows_match_single_rows():
    """k rows in one call equal k one-row calls (weights read once for all rows, no cross-row mixing)."""
    codes, scale, zero = quantize_int4(_w(64, 192, 9))
    packed = pack_int4(codes)
    x = torch.randn(8, 192, generator=torch.Generator().manual_seed(4))
    d = [t.to(_dev()) for t in (packed, scale, zero)]
    block = int4_matmul(x.to(_dev()), *d)
    for m in range(8):
        torch.testing.assert_close(block[m : m + 1], int4_matmul(x[m : m + 1].to(_dev()), *d), rtol=1e-5, atol=1e-5)

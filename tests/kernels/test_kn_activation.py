"""SiLU(gate) * up in one pass (runtime.kernels.activation) vs its torch reference.

No tl.dot: the tolerance is a few fp32 roundings and exp's approximation on a GPU (kernel_tolerance.APPROX),
relative to |silu(g) u|, plus the output dtype's last place.
"""
from __future__ import annotations

import pytest
import torch
from kernel_tolerance import APPROX, U, assert_within

from runtime.kernels.activation import silu_mul, silu_mul_ref


@pytest.mark.parametrize("T,N", [(1, 4864), (5, 100), (16, 1024)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_mul_matches_reference(T, N, dtype):
    g = torch.Generator().manual_seed(T + N)
    x = (torch.randn(T, 2 * N, generator=g) * 3).to(dtype)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    got = silu_mul(x.to(dev))
    want = silu_mul_ref(x)
    assert got.shape == (T, N) and got.dtype == dtype
    assert_within(got, want, (8 * U + 4 * APPROX) * want.double().abs(), f"silu_mul {T}x{N} {dtype}")

"""SiLU(gate) * up in one pass over a fused gate|up projection's output (the MLP's activation)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _silu_mul_kernel(X, Y, stride_x, stride_y, N, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < N
    g = tl.load(X + t * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(X + t * stride_x + N + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + t * stride_y + cols, (g / (1.0 + tl.exp(-g)) * u).to(Y.dtype.element_ty), mask=m)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """gate_up (T, 2N) = [gate | up] -> silu(gate) * up (T, N) in gate_up's dtype, fp32 math, one rounding."""
    T, n2 = gate_up.shape
    N = n2 // 2
    assert n2 == 2 * N and gate_up.stride(1) == 1
    y = torch.empty((T, N), dtype=gate_up.dtype, device=gate_up.device)
    if T:
        _silu_mul_kernel[(T, triton.cdiv(N, 1024))](gate_up, y, gate_up.stride(0), y.stride(0), N, BLOCK=1024)
    return y


def silu_mul_ref(gate_up: torch.Tensor) -> torch.Tensor:
    g, u = gate_up.float().chunk(2, dim=1)
    return (F.silu(g) * u).to(gate_up.dtype)

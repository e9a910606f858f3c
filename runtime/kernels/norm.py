"""Fused RMSNorm (+ residual add): y = rms_norm(x + residual) * weight, residual updated in place."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(X, R, W, Y, stride_x, stride_r, stride_y, N, eps,
                     HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        h += tl.load(R + row * stride_r + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(R + row * stride_r + cols, h.to(R.dtype.element_ty), mask=mask)
    var = tl.sum(h * h, axis=0) / N
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    y = h * tl.rsqrt(var + eps) * w
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None,
             out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """x (..., N) -> rms_norm(x [+ residual]) * weight in out_dtype (default x's dtype); fp32 math.

    With `residual` (same shape as x, any float dtype), residual <- residual + x first (in place) and the
    norm is taken of that sum: the pre-norm transformer's "add the block output, normalize" in one pass.
    """
    N = x.shape[-1]
    assert weight.shape == (N,) and x.stride(-1) == 1
    rows = x.numel() // N
    x2 = x.reshape(rows, N)  # a view for the (T, N) and (T, heads, N) layouts the model uses
    if residual is not None:
        assert residual.shape == x.shape and residual.stride(-1) == 1
        r2 = residual.view(rows, N)
    else:
        r2 = x2
    y = torch.empty(x.shape, dtype=out_dtype or x.dtype, device=x.device)
    y2 = y.view(rows, N)
    if rows:
        _rms_norm_kernel[(rows,)](x2, r2, weight, y2, x2.stride(0), r2.stride(0), y2.stride(0), N, eps,
                                  HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(N))
    return y


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None,
                 out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Torch reference: same contract as rms_norm (updates residual in place)."""
    h = x.float()
    if residual is not None:
        h = h + residual.float()
        residual.copy_(h.to(residual.dtype))
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return y.to(out_dtype or x.dtype)

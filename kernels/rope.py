"""RoPE applied in place to (T, heads, head_dim) views, angles gathered from a table at given positions."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(X, Pos, Cos, Sin, stride_xt, stride_xh, stride_c, H,
                 HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, INTERLEAVED: tl.constexpr):
    t = tl.program_id(0)
    pos = tl.load(Pos + t)
    i = tl.arange(0, BLOCK_D)
    dmask = i < HALF
    cos = tl.load(Cos + pos * stride_c + i, mask=dmask, other=1.0).to(tl.float32)
    sin = tl.load(Sin + pos * stride_c + i, mask=dmask, other=0.0).to(tl.float32)
    if INTERLEAVED:  # GPT-J: pairs (2i, 2i+1)
        o1 = 2 * i
        o2 = 2 * i + 1
    else:  # NeoX: (i, i + half)
        o1 = i
        o2 = i + HALF
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        m = (h < H)[:, None] & dmask[None, :]
        base = X + t * stride_xt + h[:, None] * stride_xh
        x1 = tl.load(base + o1[None, :], mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(base + o2[None, :], mask=m, other=0.0).to(tl.float32)
        y1 = x1 * cos[None, :] - x2 * sin[None, :]
        y2 = x2 * cos[None, :] + x1 * sin[None, :]
        tl.store(base + o1[None, :], y1.to(X.dtype.element_ty), mask=m)
        tl.store(base + o2[None, :], y2.to(X.dtype.element_ty), mask=m)


def rope_(x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
          interleaved: bool = False) -> torch.Tensor:
    """Rotate x (T, heads, head_dim) in place; positions (T,) int on x's device; cos/sin (context, head_dim/2).

    x may be a strided view (e.g. the q or k columns of a fused qkv output); its last dim must be contiguous.
    """
    T, H, D = x.shape
    assert x.stride(2) == 1 and cos.shape[1] == D // 2 and cos.stride() == sin.stride() and cos.stride(1) == 1
    if T:
        half = D // 2
        _rope_kernel[(T,)](x, positions, cos, sin, x.stride(0), x.stride(1), cos.stride(0), H,
                           HALF=half, BLOCK_H=min(triton.next_power_of_2(H), 16),
                           BLOCK_D=triton.next_power_of_2(half), INTERLEAVED=interleaved)
    return x


def rope_ref(x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
             interleaved: bool = False) -> torch.Tensor:
    """Torch reference (out of place), the same math as runtime.model.rope."""
    c, s = cos[positions].float()[:, None, :], sin[positions].float()[:, None, :]
    xf = x.float()
    if interleaved:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        y = torch.stack([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).flatten(-2)
    else:
        half = x.shape[-1] // 2
        x1, x2 = xf[..., :half], xf[..., half:]
        y = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return y.to(x.dtype)

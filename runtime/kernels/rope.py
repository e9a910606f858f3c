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


@triton.jit
def _rope_qkv_kernel(QKV, Pos, Cos, Sin, KC, VC, stride_t, stride_c, stride_kh, stride_ks, stride_vh, stride_vs,
                     H: tl.constexpr, HKV: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr,
                     BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, INTERLEAVED: tl.constexpr):
    t = tl.program_id(0)
    pos = tl.load(Pos + t)
    i = tl.arange(0, BLOCK_D)
    dmask = i < HALF
    cos = tl.load(Cos + pos * stride_c + i, mask=dmask, other=1.0).to(tl.float32)
    sin = tl.load(Sin + pos * stride_c + i, mask=dmask, other=0.0).to(tl.float32)
    if INTERLEAVED:
        o1 = 2 * i
        o2 = 2 * i + 1
    else:
        o1 = i
        o2 = i + HALF
    row = QKV + t * stride_t
    for h0 in range(0, H + HKV, BLOCK_H):  # q heads, then k heads: rotated
        h = h0 + tl.arange(0, BLOCK_H)
        m = (h < H + HKV)[:, None] & dmask[None, :]
        base = row + h[:, None] * D
        x1 = tl.load(base + o1[None, :], mask=m, other=0.0).to(tl.float32)
        x2 = tl.load(base + o2[None, :], mask=m, other=0.0).to(tl.float32)
        y1 = (x1 * cos[None, :] - x2 * sin[None, :]).to(QKV.dtype.element_ty)
        y2 = (x2 * cos[None, :] + x1 * sin[None, :]).to(QKV.dtype.element_ty)
        mq = m & (h < H)[:, None]
        tl.store(base + o1[None, :], y1, mask=mq)
        tl.store(base + o2[None, :], y2, mask=mq)
        mk = m & (h >= H)[:, None]
        kbase = KC + (h - H)[:, None] * stride_kh + pos * stride_ks
        tl.store(kbase + o1[None, :], y1.to(KC.dtype.element_ty), mask=mk)
        tl.store(kbase + o2[None, :], y2.to(KC.dtype.element_ty), mask=mk)
    d = tl.arange(0, 2 * BLOCK_D)
    for h0 in range(0, HKV, BLOCK_H):  # v heads: copied
        h = h0 + tl.arange(0, BLOCK_H)
        m = (h < HKV)[:, None] & (d < D)[None, :]
        v = tl.load(row + (H + HKV + h)[:, None] * D + d[None, :], mask=m, other=0.0)
        tl.store(VC + h[:, None] * stride_vh + pos * stride_vs + d[None, :], v.to(VC.dtype.element_ty), mask=m)


def rope_qkv_(qkv: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, k_cache: torch.Tensor,
              v_cache: torch.Tensor, heads: int, kv_heads: int, interleaved: bool = False) -> torch.Tensor:
    """One launch for a layer's fused q|k|v rows (T, (heads + 2 kv_heads) * D): RoPE on q in place, k rotated and
    v copied into k_cache, v_cache (kv_heads, capacity, D) at `positions` (what rope_ twice and two index_copy_
    do in four). Returns q as a (T, heads, D) view of qkv."""
    T = qkv.shape[0]
    D = k_cache.shape[2]
    assert qkv.shape[1] == (heads + 2 * kv_heads) * D and qkv.stride(1) == 1
    assert k_cache.stride(2) == 1 and v_cache.stride(2) == 1 and cos.shape[1] == D // 2 and cos.stride() == sin.stride()
    if T:
        half = D // 2
        _rope_qkv_kernel[(T,)](qkv, positions, cos, sin, k_cache, v_cache, qkv.stride(0), cos.stride(0),
                               k_cache.stride(0), k_cache.stride(1), v_cache.stride(0), v_cache.stride(1),
                               H=heads, HKV=kv_heads, D=D, HALF=half, BLOCK_H=min(triton.next_power_of_2(heads + kv_heads), 16),
                               BLOCK_D=triton.next_power_of_2(half), INTERLEAVED=interleaved)
    return qkv[:, : heads * D].view(T, heads, D)

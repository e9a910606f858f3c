"""Attention of T new queries (decode T=1, verify T=k) over the session's KV cache, GQA-aware and split
along the sequence (flash-decoding), for the CUDA path.

Layouts: q (T, heads, D), a strided view is fine (e.g. the q columns of a fused qkv output);
k_cache, v_cache (kv_heads, capacity, D) (one layer of the cache). The T new keys/values must already
be written at positions L-T .. L-1, where L is `seq_len` (a 1-element int tensor on the device, so a
captured CUDA graph serves every length). Query t sits at position L-T+t and sees keys 0 .. L-T+t.

Pass 1 runs one program per (kv head, split): it loads each K/V tile once for every query row of its
group (G = heads / kv_heads query heads x T tokens, padded to BLOCK_M >= 16 for tl.dot), and keeps an
online softmax over its slice of the sequence. Pass 2 merges the splits that hold keys by their log-sum-exp.

Slices are SPLIT_KEYS long at fixed places (key j is in slice j // SPLIT_KEYS, tiles of BLOCK_N, a function of D
alone), whatever L, T or the capacity: a verify row sees the tiles the decode step it stands for sees, plus
tiles it masks whole, which add exact zeros. So row t of a verify block is bit-equal to the decode at length
L-T+t+1 (what lossless greedy speculation needs); the programs past the cache's last slice exit at once.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

_EMPTY = -1.0e30  # log-sum-exp of a split that saw no key (finite: keeps pass 2 free of inf - inf)
# tl.dot input precision, chosen on purpose: "ieee" (fp32 FMAs, no tensor-core rounding). The scaled q and the
# probabilities p are fp32 values that tf32 would round to 10 bits (1e-3 on the output, seen on an H200);
# exact dots keep a verify row equal to the decode row it stands for. The work per key is tiny at T <= 16.
DOT_PRECISION = "ieee"
SPLIT_KEYS = 256  # keys per split (a multiple of every BLOCK_N below)


@triton.jit
def _attn_split_kernel(Q, K, V, SeqLen, MidO, MidL, qk_scale,
                       stride_qt, stride_qh, stride_kh, stride_ks, stride_vh, stride_vs,
                       T: tl.constexpr, G: tl.constexpr, D: tl.constexpr, NUM_SPLITS: tl.constexpr, CHUNK: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    kvh = tl.program_id(0)
    sp = tl.program_id(1)
    L = tl.load(SeqLen).to(tl.int32)
    rows = tl.arange(0, BLOCK_M)
    t = rows // G
    head = kvh * G + rows % G
    rvalid = rows < T * G
    d = tl.arange(0, D)
    q = tl.load(Q + t[:, None] * stride_qt + head[:, None] * stride_qh + d[None, :], mask=rvalid[:, None], other=0.0)
    q = q.to(tl.float32) * qk_scale  # scale includes log2(e): exp2 below
    qpos = L - T + t
    lo = sp * CHUNK
    hi = tl.minimum(lo + CHUNK, L)
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for n0 in range(lo, hi, BLOCK_N):
        offs = n0 + tl.arange(0, BLOCK_N)
        kmask = offs < hi
        k = tl.load(K + kvh * stride_kh + offs[:, None] * stride_ks + d[None, :], mask=kmask[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision=PRECISION)
        valid = kmask[None, :] & (offs[None, :] <= qpos[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(V + kvh * stride_vh + offs[:, None] * stride_vs + d[None, :], mask=kmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32), input_precision=PRECISION)
        m_i = m_new
    seen = l_i > 0
    lse = tl.where(seen, m_i + tl.log2(tl.where(seen, l_i, 1.0)), -1.0e30)
    o = acc / tl.where(seen, l_i, 1.0)[:, None]
    base = kvh * NUM_SPLITS + sp
    tl.store(MidO + (base * BLOCK_M + rows[:, None]) * D + d[None, :], o)
    tl.store(MidL + base * BLOCK_M + rows, lse)


@triton.jit
def _attn_merge_kernel(MidO, MidL, SeqLen, Out, stride_ot, stride_oh,
                       T: tl.constexpr, G: tl.constexpr, D: tl.constexpr, NUM_SPLITS: tl.constexpr, CHUNK: tl.constexpr,
                       BLOCK_M: tl.constexpr):
    kvh = tl.program_id(0)
    rows = tl.arange(0, BLOCK_M)
    d = tl.arange(0, D)
    base = kvh * NUM_SPLITS
    used = tl.cdiv(tl.load(SeqLen).to(tl.int32), CHUNK)  # the splits holding keys; the rest are not read
    m = tl.full([BLOCK_M], -1.0e30, tl.float32)
    for sp in range(0, used):
        m = tl.maximum(m, tl.load(MidL + (base + sp) * BLOCK_M + rows))
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    den = tl.zeros([BLOCK_M], tl.float32)
    for sp in range(0, used):
        w = tl.exp2(tl.load(MidL + (base + sp) * BLOCK_M + rows) - m)
        acc += w[:, None] * tl.load(MidO + ((base + sp) * BLOCK_M + rows[:, None]) * D + d[None, :])
        den += w
    out = acc / den[:, None]
    t = rows // G
    head = kvh * G + rows % G
    mask = (rows < T * G)[:, None]
    tl.store(Out + t[:, None] * stride_ot + head[:, None] * stride_oh + d[None, :], out.to(Out.dtype.element_ty), mask=mask)


def num_splits(capacity: int, split_keys: int = SPLIT_KEYS) -> int:
    """Split programs a cache of this capacity needs (one per SPLIT_KEYS keys)."""
    return triton.cdiv(capacity, split_keys)


def block_n(D: int) -> int:
    """Keys per tile: a function of the head size alone (see the module docstring)."""
    return 64 if D <= 64 else 32


def verify_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, seq_len: torch.Tensor | int,
                     *, split_keys: int = SPLIT_KEYS, out: torch.Tensor | None = None,
                     scratch: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """q (T, heads, D) -> (T, heads, D): causal attention of the last T positions over keys 0..L-1.

    split_keys: keys per split (a multiple of block_n(D); smaller in tests, to merge many splits).
    `scratch` (MidO, MidL) may be given to keep every buffer static (CUDA graphs); see scratch_for.
    """
    T, H, D = q.shape
    kvh, cap, Dk = k_cache.shape
    assert Dk == D and H % kvh == 0 and D == triton.next_power_of_2(D) and D >= 16
    assert q.stride(2) == 1 and k_cache.stride(2) == 1 and v_cache.stride(2) == 1 and v_cache.shape == k_cache.shape
    bn = block_n(D)
    assert split_keys % bn == 0, (split_keys, bn)
    if not torch.is_tensor(seq_len):
        assert T <= seq_len <= cap, (T, seq_len, cap)
        seq_len = torch.tensor([seq_len], dtype=torch.int32, device=q.device)
    G = H // kvh
    splits = num_splits(cap, split_keys)
    block_m = max(16, triton.next_power_of_2(T * G))
    mid_o, mid_l = scratch if scratch is not None else scratch_for(T, H, kvh, D, cap, q.device, split_keys)
    assert mid_o.shape == (kvh, splits, block_m, D) and mid_l.shape == (kvh, splits, block_m), "scratch shape"
    if out is None:
        out = torch.empty((T, H, D), dtype=q.dtype, device=q.device)
    qk_scale = 1.0 / math.sqrt(D) * 1.4426950408889634
    _attn_split_kernel[(kvh, splits)](q, k_cache, v_cache, seq_len, mid_o, mid_l, qk_scale,
                                      q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1),
                                      v_cache.stride(0), v_cache.stride(1),
                                      T=T, G=G, D=D, NUM_SPLITS=splits, CHUNK=split_keys, BLOCK_M=block_m, BLOCK_N=bn,
                                      PRECISION=DOT_PRECISION, num_warps=4 if block_m <= 32 else 8)
    _attn_merge_kernel[(kvh,)](mid_o, mid_l, seq_len, out, out.stride(0), out.stride(1),
                               T=T, G=G, D=D, NUM_SPLITS=splits, CHUNK=split_keys, BLOCK_M=block_m)
    return out


def scratch_for(T: int, heads: int, kv_heads: int, D: int, capacity: int, device,
                split_keys: int = SPLIT_KEYS) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-split partial outputs and log-sum-exps verify_attention needs for these shapes."""
    block_m = max(16, triton.next_power_of_2(T * (heads // kv_heads)))
    splits = num_splits(capacity, split_keys)
    return (torch.empty((kv_heads, splits, block_m, D), dtype=torch.float32, device=device),
            torch.empty((kv_heads, splits, block_m), dtype=torch.float32, device=device))


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, seq_len: torch.Tensor | int,
                     **kwargs) -> torch.Tensor:
    """One query per head: q (heads, D) or (1, heads, D) -> same shape; attends to keys 0..L-1."""
    out = verify_attention(q.reshape(1, *q.shape[-2:]) if q.dim() == 2 else q, k_cache, v_cache, seq_len, **kwargs)
    return out.view(q.shape)


def attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Torch reference in fp32: q (T, heads, D), caches (kv_heads, >= L, D) -> (T, heads, D) in q's dtype."""
    T, H, D = q.shape
    kvh = k_cache.shape[0]
    k = k_cache[:, :seq_len].float().repeat_interleave(H // kvh, dim=0)  # (H, L, D)
    v = v_cache[:, :seq_len].float().repeat_interleave(H // kvh, dim=0)
    s = torch.einsum("thd,hld->htl", q.float(), k) / math.sqrt(D)
    qpos = torch.arange(seq_len - T, seq_len, device=q.device)
    allowed = torch.arange(seq_len, device=q.device)[None, :] <= qpos[:, None]  # (T, L)
    s = s.masked_fill(~allowed[None], float("-inf"))
    o = torch.einsum("htl,hld->thd", s.softmax(-1), v)
    return o.to(q.dtype)

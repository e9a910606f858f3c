"""Tolerances for tests/kernels, derived from each kernel's tl.dot input precision and reduction length.

The rule. u = 2^-24 is fp32's unit roundoff. A tl.dot operand is rounded on input by u_in: 0 for "ieee",
2^-10 for "tf32" (10 stored bits; the tensor cores may truncate rather than round) and 2^-8 for "bf16".
- A length-K dot accumulated in fp32, once by the kernel and once by the fp32 reference, each in its own
  order, differs by at most
      (2 u_in + 2 LAMBDA sqrt(K + c) u) * sum_k |a_k| |b_k|
  where c counts the few extra roundings (a scale, a bias, split-K partial sums). The input term is a
  worst case (it covers truncation's bias); the accumulation term is Higham & Mary's probabilistic bound
  (SIAM J. Sci. Comput. 41(5), 2019): with independent rounding errors it fails with probability below
  2 exp(-LAMBDA^2 / 2) = 3e-14 per element at LAMBDA = 8. The worst case K u is sqrt(K) times looser and
  would let a tf32 dot pass for an ieee one.
- A result stored in dtype d adds one unit in its last place, eps_d |want| (2^-23 fp32, 2^-7 bf16): the
  two sides round values that may straddle a rounding boundary.
- Attention: a score error ds_j moves output o by sum_j p_j ds_j |v_j - o| to first order (p the softmax
  weights); the p.v sum adds the dot rule on sum_j p_j |v_j|; exp2 and rsqrt on a GPU are approximations,
  APPROX relative each.
- Norm and RoPE: a length-N sum of squares (the dot rule without input rounding) and a few roundings.
These bound a correct kernel on any device and under the interpreter (which computes every dot in full
fp32); a wrong index, offset or mask is off by the size of the values themselves, far above them.
"""
from __future__ import annotations

import math

import torch

U = 2.0 ** -24
LAMBDA = 8.0
INPUT_ROUNDOFF = {"ieee": 0.0, "tf32": 2.0 ** -10, "bf16": 2.0 ** -8}
EPS = {torch.float32: 2.0 ** -23, torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}
APPROX = 2.0 ** -21  # relative error of the GPU's exp2 / rsqrt approximations (PTX: about 2^-22)


def dot_rel(k: int, precision: str, extra: int = 4) -> float:
    """The dot rule's factor on sum |a||b| for a reduction of length k (see the module docstring)."""
    return 2 * INPUT_ROUNDOFF[precision] + 2 * LAMBDA * math.sqrt(k + extra) * U


def assert_within(got: torch.Tensor, want: torch.Tensor, bound: torch.Tensor | float, what: str = "") -> None:
    """|got - want| <= bound + eps(got's dtype) |want| elementwise; the message shows the worst element."""
    assert got.shape == want.shape, (got.shape, want.shape)
    want64 = want.detach().double().cpu()
    err = (got.detach().double().cpu() - want64).abs()
    allowed = torch.as_tensor(bound, dtype=torch.float64).cpu() + EPS[got.dtype] * want64.abs() + 1e-300
    ratio = err / allowed
    worst = int(ratio.argmax())
    assert float(ratio.max()) <= 1.0, (
        f"{what}: {int((ratio > 1).sum())} of {err.numel()} elements past the derived bound; worst "
        f"|diff| {float(err.flatten()[worst]):.3e} > allowed {float(allowed.flatten()[worst]):.3e}")


def matmul_bound(x: torch.Tensor, w_abs: torch.Tensor, precision: str, bias: torch.Tensor | None = None) -> torch.Tensor:
    """y = x @ W.T: x (M, K), w_abs (N, K) the magnitudes |W| (for int4: |code - 8| * s + |z|)."""
    mag = x.detach().double().cpu().abs() @ w_abs.detach().double().cpu().t()
    out = dot_rel(x.shape[1], precision) * mag
    if bias is not None:
        out = out + 2 * U * bias.detach().double().cpu().abs()
    return out


def attention_bound(q, k_cache, v_cache, seq_len: int, precision: str) -> torch.Tensor:
    """Bound for runtime.kernels.attention.verify_attention(q, k_cache, v_cache, seq_len) against attention_ref."""
    T, H, D = q.shape
    G = H // k_cache.shape[0]
    qd = q.detach().double().cpu()
    k = k_cache[:, :seq_len].detach().double().cpu().repeat_interleave(G, dim=0)  # (H, L, D)
    v = v_cache[:, :seq_len].detach().double().cpu().repeat_interleave(G, dim=0)
    scale = 1 / math.sqrt(D)
    s = torch.einsum("thd,hld->thl", qd, k) * scale
    qpos = torch.arange(seq_len - T, seq_len)
    s = s.masked_fill(~(torch.arange(seq_len)[None, :] <= qpos[:, None])[:, None, :], float("-inf"))
    p = s.softmax(-1)  # (T, H, L)
    o = torch.einsum("thl,hld->thd", p, v)
    ds = dot_rel(D, precision, extra=12) * torch.einsum("thd,hld->thl", qd.abs(), k.abs()) * scale + 4 * APPROX
    dv = (v[None] - o[:, :, None, :]).abs()  # (T, H, L, D)
    first = 2 * torch.einsum("thl,thld->thd", p * ds, dv)
    pv = torch.einsum("thl,hld->thd", p, v.abs())
    return first + (dot_rel(seq_len, precision, extra=32) + 4 * APPROX) * pv


def norm_bound(want: torch.Tensor, n: int) -> torch.Tensor:
    """RMSNorm output: a length-n sum of squares, the rsqrt, a few roundings; relative to |want|."""
    return (2 * LAMBDA * math.sqrt(n + 8) * U + 2 * APPROX) * want.detach().double().cpu().abs()


def rope_bound(x: torch.Tensor) -> torch.Tensor:
    """RoPE: x1 c - x2 s, two products and a difference (or an FMA) per side, |c|, |s| <= 1: each side
    within 3 u (|x1| + |x2|) <= 6 u max |x| of the row; both sides: 12 u max |x|."""
    xd = x.detach().double().cpu().abs()
    return 12 * U * xd.amax(-1, keepdim=True).expand(xd.shape)


def model_tol(config, precision: str = "ieee") -> float:
    """Whole-model logits, kernels vs runtime.model.Qwen2Model, both in fp32: the dot rule at the longest
    reduction for each of the 4 L + 1 matmuls in sequence (errors carried by the residual stream add up
    to first order), as a fraction of max |logit|."""
    k = max(config.hidden_size, config.intermediate_size, config.num_heads * config.head_dim)
    return (4 * config.num_layers + 1) * dot_rel(k, precision)


def int4_magnitudes(packed: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """|code - 8| s + |z| per weight of an int4 pack (runtime.kernels.quant's layout): the magnitudes its dot sums."""
    codes = torch.cat([packed & 15, packed >> 4], dim=1).double().cpu() - 8
    s = scale.double().cpu().repeat_interleave(32, 1)
    z = zero.double().cpu().abs().repeat_interleave(32, 1)
    return codes.abs() * s + z

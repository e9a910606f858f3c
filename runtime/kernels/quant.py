"""Weight-only quantized matmul y = x @ W.T (+ bias) for small M (decode, verify), W dequantized in registers.

Formats (N = out features, K = in features):
  int8  q (N, K) int8, scale (N,):  W = q * scale[n]                       (runtime.weights' int8 rows)
  int4  packed (N, K/2) uint8, scale, zero (N, K/32):  W = (code - 8) * scale + zero per group of 32,
        byte j of a row holds column j in its low nibble and column j + K/2 in its high nibble
        (K % 64 == 0), so a group of 32 bytes unpacks to two whole groups without shuffles.
        The (code - 8) * scale + zero form is the one runtime.weights recovers exactly from Q4_K.

Each program owns BLOCK_N output columns and a slice of K (SPLIT_K > 1 spreads a GEMV with few output
columns over more programs; partial sums then go through a small epilogue kernel). Weight bytes are
read once for all M rows, which is the point for verify: k rows cost about what one row costs.

tl.dot input precision, chosen on purpose (runtime.kernels.dot_precision of the activations): its operands are the
activations and small integers (int8 codes, int4 codes - 8), never a dequantized weight: the int4 kernel takes
per group s * sum(x * (code - 8)) + z * sum(x) rather than dot(x, W). Integers below 2^11 and bf16 activations
(the model's) are exact in tf32, and so are their products in the fp32 accumulator, so "tf32" computes what
"ieee" would, on the tensor cores; fp32 activations (tests) take "ieee".
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from runtime.kernels import dot_precision

GROUP = 32


@triton.jit
def _int8_mm_kernel(X, Wq, Scale, Bias, Out, Part, M, N, K, stride_xm, stride_wn, stride_om,
                    HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mm, nm = rm < M, rn < N
    k_per = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    k_lo = pid_k * k_per
    k_hi = tl.minimum(k_lo + k_per, K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        km = rk < k_hi
        x = tl.load(X + rm[:, None] * stride_xm + rk[None, :], mask=mm[:, None] & km[None, :], other=0.0)
        w = tl.load(Wq + rn[:, None] * stride_wn + rk[None, :], mask=nm[:, None] & km[None, :], other=0)
        acc += tl.dot(x.to(tl.float32), tl.trans(w.to(tl.float32)), input_precision=PRECISION)
    if SPLIT_K == 1:
        y = acc * tl.load(Scale + rn, mask=nm, other=0.0).to(tl.float32)[None, :]
        if HAS_BIAS:
            y += tl.load(Bias + rn, mask=nm, other=0.0).to(tl.float32)[None, :]
        tl.store(Out + rm[:, None] * stride_om + rn[None, :], y.to(Out.dtype.element_ty), mask=mm[:, None] & nm[None, :])
    else:
        tl.store(Part + (pid_k * M + rm[:, None]) * N + rn[None, :], acc, mask=mm[:, None] & nm[None, :])


@triton.jit
def _int4_mm_kernel(X, P, Scale, Zero, Bias, Out, Part, M, N, K, stride_xm, stride_pn, stride_sn, stride_om,
                    HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GS: tl.constexpr, PRECISION: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mm, nm = rm < M, rn < N
    half = K // 2
    n_groups = half // GS  # groups in each half of a row
    g_per = tl.cdiv(n_groups, SPLIT_K)
    g_lo = pid_k * g_per
    g_hi = tl.minimum(g_lo + g_per, n_groups)
    j = tl.arange(0, GS)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for g in range(g_lo, g_hi):
        p = tl.load(P + rn[:, None] * stride_pn + (g * GS + j)[None, :], mask=nm[:, None], other=0).to(tl.int32)
        s_lo = tl.load(Scale + rn * stride_sn + g, mask=nm, other=0.0).to(tl.float32)
        z_lo = tl.load(Zero + rn * stride_sn + g, mask=nm, other=0.0).to(tl.float32)
        s_hi = tl.load(Scale + rn * stride_sn + g + n_groups, mask=nm, other=0.0).to(tl.float32)
        z_hi = tl.load(Zero + rn * stride_sn + g + n_groups, mask=nm, other=0.0).to(tl.float32)
        c_lo = ((p & 15) - 8).to(tl.float32)  # small integers: exact in any dot precision
        c_hi = ((p >> 4) - 8).to(tl.float32)
        x_lo = tl.load(X + rm[:, None] * stride_xm + (g * GS + j)[None, :], mask=mm[:, None], other=0.0).to(tl.float32)
        x_hi = tl.load(X + rm[:, None] * stride_xm + (half + g * GS + j)[None, :], mask=mm[:, None], other=0.0).to(tl.float32)
        # W = (code - 8) * s + z per group, so x . W = s * (x . (code - 8)) + z * sum(x)
        acc += tl.dot(x_lo, tl.trans(c_lo), input_precision=PRECISION) * s_lo[None, :] + tl.sum(x_lo, axis=1)[:, None] * z_lo[None, :]
        acc += tl.dot(x_hi, tl.trans(c_hi), input_precision=PRECISION) * s_hi[None, :] + tl.sum(x_hi, axis=1)[:, None] * z_hi[None, :]
    if SPLIT_K == 1:
        y = acc
        if HAS_BIAS:
            y += tl.load(Bias + rn, mask=nm, other=0.0).to(tl.float32)[None, :]
        tl.store(Out + rm[:, None] * stride_om + rn[None, :], y.to(Out.dtype.element_ty), mask=mm[:, None] & nm[None, :])
    else:
        tl.store(Part + (pid_k * M + rm[:, None]) * N + rn[None, :], acc, mask=mm[:, None] & nm[None, :])


@triton.jit
def _splitk_epilogue(Part, Scale, Bias, Out, M, N, stride_om,
                     HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_N: tl.constexpr):
    m = tl.program_id(0)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    nm = rn < N
    y = tl.zeros([BLOCK_N], tl.float32)
    for s in range(SPLIT_K):
        y += tl.load(Part + (s * M + m) * N + rn, mask=nm, other=0.0)
    if HAS_SCALE:
        y *= tl.load(Scale + rn, mask=nm, other=0.0).to(tl.float32)
    if HAS_BIAS:
        y += tl.load(Bias + rn, mask=nm, other=0.0).to(tl.float32)
    tl.store(Out + m * stride_om + rn, y.to(Out.dtype.element_ty), mask=nm)


def _split_k(n_blocks: int, k_steps: int, split_k: int | None) -> int:
    if split_k is not None:
        return max(1, min(split_k, k_steps))
    return max(1, min(k_steps, 128 // max(n_blocks, 1)))  # aim for >= ~128 programs on a big GPU


def _finish(part, scale, bias, out, M, N, split_k, has_scale):
    if split_k > 1:
        _splitk_epilogue[(M, triton.cdiv(N, 128))](part, scale, bias if bias is not None else part, out, M, N, out.stride(0),
                                                   HAS_SCALE=has_scale, HAS_BIAS=bias is not None, SPLIT_K=split_k, BLOCK_N=128)
    return out


def int8_matmul(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None, *,
                out: torch.Tensor | None = None, split_k: int | None = None, block_n: int = 64, block_k: int = 128) -> torch.Tensor:
    """x (M, K) -> (M, N) in x's dtype; q (N, K) int8, scale (N,), bias (N,) or None."""
    M, K = x.shape
    N = q.shape[0]
    assert q.shape == (N, K) and q.dtype == torch.int8 and q.stride(1) == 1 and x.stride(1) == 1 and scale.shape == (N,)
    out = torch.empty((M, N), dtype=x.dtype, device=x.device) if out is None else out
    block_m = 16 if M <= 16 else 32
    sk = _split_k(triton.cdiv(N, block_n), triton.cdiv(K, block_k), split_k)
    part = torch.empty((sk, M, N), dtype=torch.float32, device=x.device) if sk > 1 else out
    _int8_mm_kernel[(triton.cdiv(N, block_n), triton.cdiv(M, block_m), sk)](
        x, q, scale, bias if bias is not None else scale, out, part, M, N, K, x.stride(0), q.stride(0), out.stride(0),
        HAS_BIAS=bias is not None, SPLIT_K=sk, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        PRECISION=dot_precision(x.dtype))
    return _finish(part, scale, bias, out, M, N, sk, True)


def int4_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor,
                bias: torch.Tensor | None = None, *, out: torch.Tensor | None = None, split_k: int | None = None,
                block_n: int = 64) -> torch.Tensor:
    """x (M, K) -> (M, N) in x's dtype; packed (N, K/2) uint8, scale/zero (N, K/32) (see the module docstring)."""
    M, K = x.shape
    N = packed.shape[0]
    assert K % (2 * GROUP) == 0 and packed.shape == (N, K // 2) and packed.dtype == torch.uint8
    assert scale.shape == zero.shape == (N, K // GROUP) and scale.stride() == zero.stride() and scale.stride(1) == 1
    assert packed.stride(1) == 1 and x.stride(1) == 1
    out = torch.empty((M, N), dtype=x.dtype, device=x.device) if out is None else out
    block_m = 16 if M <= 16 else 32
    sk = _split_k(triton.cdiv(N, block_n), K // (2 * GROUP), split_k)
    part = torch.empty((sk, M, N), dtype=torch.float32, device=x.device) if sk > 1 else out
    _int4_mm_kernel[(triton.cdiv(N, block_n), triton.cdiv(M, block_m), sk)](
        x, packed, scale, zero, bias if bias is not None else scale, out, part, M, N, K,
        x.stride(0), packed.stride(0), scale.stride(0), out.stride(0),
        HAS_BIAS=bias is not None, SPLIT_K=sk, BLOCK_M=block_m, BLOCK_N=block_n, GS=GROUP, PRECISION=dot_precision(x.dtype))
    return _finish(part, scale, bias, out, M, N, sk, False)


# --- formats and references ---------------------------------------------------------------------

def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8 (the same rule as runtime.weights.quantize_int8): (q (N, K) int8, scale (N,) fp32)."""
    scale = w.float().abs().amax(dim=1).clamp_min(1e-30) / 127
    return torch.round(w.float() / scale[:, None]).clamp_(-127, 127).to(torch.int8), scale


def quantize_int4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric 4-bit, groups of 32 along K: codes (N, K) int32 0..15, scale, zero (N, K/32) fp32."""
    N, K = w.shape
    g = w.float().reshape(N, K // GROUP, GROUP)
    lo, hi = g.amin(-1), g.amax(-1)
    scale = (hi - lo) / 15
    codes = torch.round((g - lo[..., None]) / torch.where(scale > 0, scale, 1.0)[..., None]).clamp_(0, 15)
    return codes.to(torch.int32).reshape(N, K), scale, lo + 8 * scale


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """codes (N, K) 0..15 -> packed (N, K/2) uint8: low nibble column j, high nibble column j + K/2."""
    N, K = codes.shape
    assert K % (2 * GROUP) == 0 and int(codes.min()) >= 0 and int(codes.max()) <= 15
    c = codes.to(torch.uint8)
    return (c[:, : K // 2] | (c[:, K // 2 :] << 4)).contiguous()


def dequantize_int4(packed: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """packed (N, K/2) + scale/zero (N, K/32) -> W (N, K) fp32."""
    codes = torch.cat([packed & 15, packed >> 4], dim=1).float()  # (N, K)
    N, K = codes.shape
    s = scale.float().repeat_interleave(GROUP, dim=1)
    z = zero.float().repeat_interleave(GROUP, dim=1)
    return (codes - 8) * s + z


def int8_matmul_ref(x, q, scale, bias=None):
    y = x.float() @ (q.float() * scale.float()[:, None]).t()
    return (y if bias is None else y + bias.float()).to(x.dtype)


def int4_matmul_ref(x, packed, scale, zero, bias=None):
    y = x.float() @ dequantize_int4(packed, scale, zero).t()
    return (y if bias is None else y + bias.float()).to(x.dtype)

"""Dense matmul y = x @ W.T (+ bias) for small M (decode, verify), W bf16 (N, K): a row's result never depends on M.

cuBLAS picks another algorithm (another summation order) for 1 row than for 8, so a verify row would differ
from the decode step it stands for in its last bits, and greedy speculative decoding could take another token
at a near-tie. Here every M <= 16 runs one program shape (BLOCK_M = 16), one split of K (from N and K only),
and the same order over K, so row m of an M-row call is bit-equal to a 1-row call on that row.

tl.dot input precision, chosen on purpose (runtime.kernels.dot_precision): "tf32" for bf16 activations and weights (the
model's), which tf32 holds exactly: exact products, fp32 sums, as "ieee" would give, on the tensor cores; "ieee"
for fp32 ones (tests). Split-K partial sums are added in split order by runtime.kernels.quant's epilogue.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from runtime.kernels import dot_precision
from runtime.kernels.quant import _finish, _split_k
MAX_M = 16  # one BLOCK_M for every M up to this: the batch invariance above


@triton.jit
def _dense_mm_kernel(X, W, Bias, Out, Part, M, N, K, stride_xm, stride_wn, stride_om,
                     HAS_BIAS: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
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
        w = tl.load(W + rn[:, None] * stride_wn + rk[None, :], mask=nm[:, None] & km[None, :], other=0.0)
        acc += tl.dot(x.to(tl.float32), tl.trans(w.to(tl.float32)), input_precision=PRECISION)
    if SPLIT_K == 1:
        y = acc
        if HAS_BIAS:
            y += tl.load(Bias + rn, mask=nm, other=0.0).to(tl.float32)[None, :]
        tl.store(Out + rm[:, None] * stride_om + rn[None, :], y.to(Out.dtype.element_ty), mask=mm[:, None] & nm[None, :])
    else:
        tl.store(Part + (pid_k * M + rm[:, None]) * N + rn[None, :], acc, mask=mm[:, None] & nm[None, :])


def dense_matmul(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, *, out: torch.Tensor | None = None,
                 split_k: int | None = None, block_n: int = 64, block_k: int = 128) -> torch.Tensor:
    """x (M, K) with M <= MAX_M -> (M, N) in x's dtype; w (N, K) (bf16 or fp32), bias (N,) or None."""
    M, K = x.shape
    N = w.shape[0]
    assert M <= MAX_M, f"dense_matmul is for M <= {MAX_M} (got {M}); larger M is cuBLAS's"
    assert w.shape == (N, K) and w.stride(1) == 1 and x.stride(1) == 1
    out = torch.empty((M, N), dtype=x.dtype, device=x.device) if out is None else out
    sk = _split_k(triton.cdiv(N, block_n), triton.cdiv(K, block_k), split_k)
    part = torch.empty((sk, M, N), dtype=torch.float32, device=x.device) if sk > 1 else out
    _dense_mm_kernel[(triton.cdiv(N, block_n), 1, sk)](
        x, w, bias if bias is not None else w, out, part, M, N, K, x.stride(0), w.stride(0), out.stride(0),
        HAS_BIAS=bias is not None, SPLIT_K=sk, BLOCK_M=MAX_M, BLOCK_N=block_n, BLOCK_K=block_k,
        PRECISION=dot_precision(x.dtype, w.dtype))
    return _finish(part, part, bias, out, M, N, sk, False)  # no scale: the part buffer stands in for its pointer


def dense_matmul_ref(x, w, bias=None):
    y = x.float() @ w.float().t()
    return (y if bias is None else y + bias.float()).to(x.dtype)

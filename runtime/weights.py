"""CPU weight formats: what prepare_tensor stores for each GGUF tensor, and the matmul over it.

Stored formats (keys in the tensors dict, per GGUF tensor `name`):
  fp32  {name: (out, in) float32}                       norms, biases, tests' reference
  int8  {name.q8: (out, in) int8, name.q8_scale: (out,) float32}
        w = q * scale[row]; every 2-D tensor that is not an exact Q4_K (Q5_0, Q8_0, Q6_K, F16, ...)
  q5    {name.q8, name.q8_scale as int8, name.q5i: (ceil(out/16), in/32, 352) uint8}
        an exact Q5_0 weight (w = d * c, d fp16, c in -16..15, groups of 32): int8 per row for torch's
        GEMM (kernel off), and the exact codes, 16 rows interleaved per block (pack_q5i), for our kernel
  int4  {name.q4: packed uint8, name.q4_sz: (in/32, out, 2) float32}
        torch's CPU int4pack, group 32: w = (q - 8) * scale + zero, q in 0..15. A Q4_K
        block (w = d*sc*q - dmin*m, sub-blocks of 32) is recovered exactly from the fp32
        dequantized weight, so this path adds no error beyond fp32 rounding.

Matmul (chosen by measurement on a 2-core AVX-512 dev machine; figures in docs/BENCHMARKS.md):
  kernel: every M (prefill chunks, decode, verify; pieces of AGENT_CPU_KERNEL_MAX_M rows, default 256) runs in our
        C kernel (runtime/cpu_kernels/ck.c) when it builds: activations rounded per block of 32 to int8 with
        the block's own step (llama.cpp's Q8_0 rule), weights read once for up to 16 rows at a time from the
        int8 rows (q8i, regrouped), the exact Q5_0 blocks (q5i) or the exact Q4_K nibbles with fp32 scales (q4i,
        repacked from int4pack), all in groups of 16 rows (built at first use, or mapped from
        runtime.kernel_packs). Every row is computed by the same instructions whatever M is, so prefill, verify
        and decode rows are equal bit for bit; at M = 256 it is 1.5-1.9x faster than torch's int8 GEMM.
  torch (AGENT_CPU_KERNEL=0, or no C compiler): activations rounded the same way (block_quantize), then
        int8: split per row into two int8 planes, x ~= step * (hi + lo / 254), multiplied in one torch._int_mm
        (int32 accumulate) and recombined in fp32 (the planes add ~1/32000 of the row's max); Q5_0 rows use
        the int8 requantization (q8), not the exact blocks;
        int4: torch's _weight_int4pack_mm_for_cpu (bf16 activations, scales and outputs).
"""
from __future__ import annotations

import functools

import torch

from runtime import cpu_kernels

FORMAT_ID = "cpu-int8pc-q4k-int4g32-q5i-v3"  # bump whenever what prepare_tensor stores changes
Q4_GROUP = 32


def prepare_tensor(name: str, weight: torch.Tensor, ggml_type_name: str, *, fmt: str = "quant") -> dict[str, torch.Tensor]:
    """Convert one dequantized GGUF tensor (torch Linear layout (out, in)) to its stored form.

    fmt "quant" (default) stores 2-D tensors as int4 (exact Q4_K) or int8; "fp32" keeps everything fp32.
    """
    assert fmt in ("quant", "fp32"), fmt
    weight = weight.detach().to(torch.float32).contiguous()
    if weight.dim() == 1 or fmt == "fp32":
        return {name: weight}
    assert weight.dim() == 2, (name, weight.shape)
    # The embedding stays int8 even when Q4_K: a row lookup must stay a cheap gather.
    if ggml_type_name == "Q4_K" and name != "token_embd.weight":
        int4 = q4k_to_int4(weight)
        if int4 is not None:
            q, scale, zero = int4
            return {name + ".q4": torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1),
                    name + ".q4_sz": torch.stack([scale, zero], -1).contiguous()}
    q, scale = quantize_int8(weight)
    out = {name + ".q8": q, name + ".q8_scale": scale}
    if ggml_type_name == "Q5_0" and name != "token_embd.weight":
        q5 = q5_0_codes(weight)
        if q5 is not None:
            out[name + ".q5i"] = pack_q5i(*q5)
    return out


def q5_0_codes(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Recover exact Q5_0 codes from a dequantized Q5_0 weight, or None if it is not one.

    Each group of 32 holds d * c with d an fp16 number (either sign) and integers c in -16..15. The value of
    largest magnitude v has some c != 0, so d = v / c for one of 31 candidates; the first candidate (ggml's own
    choice, c = -16, first) that puts every value of the group exactly on its grid is kept.
    Returns u = c + 16 (out, in) uint8 in 0..31 and d (out, in/32) float16.
    """
    out_f, in_f = weight.shape
    if in_f % Q4_GROUP:
        return None
    g = weight.reshape(-1, Q4_GROUP)
    idx = g.abs().argmax(-1, keepdim=True)
    vmax = g.gather(-1, idx).squeeze(-1).double()
    d = torch.zeros(g.shape[0], dtype=torch.float32)
    todo = (vmax != 0).nonzero().flatten()
    for c in [-16, *range(-15, 0), *range(1, 16)]:
        if todo.numel() == 0:
            break
        cand = (vmax[todo] / c).to(torch.float16).to(torch.float32)
        gt = g[todo]
        ok = cand != 0
        r = torch.round(gt / torch.where(ok, cand, 1.0)[:, None])
        ok &= ((r >= -16) & (r <= 15) & (cand[:, None] * r == gt)).all(-1)
        d[todo[ok]] = cand[ok]
        todo = todo[~ok]
    if todo.numel():
        return None
    c = torch.round(g / torch.where(d != 0, d, 1.0)[:, None])
    c = torch.where(d[:, None] != 0, c, torch.zeros_like(c))
    return (c + 16).to(torch.uint8).reshape(out_f, in_f), d.to(torch.float16).reshape(out_f, -1)


def _pack_nibbles(u: torch.Tensor) -> torch.Tensor:
    """(out, in) codes 0..15 -> (out, in/32, 16) uint8: byte j of a group = code j | code j+16 << 4."""
    u = u.to(torch.uint8).reshape(u.shape[0], -1, 2, 16)
    return u[:, :, 0] | (u[:, :, 1] << 4)


GROUP_ROWS = 16  # the kernel's grouped formats interleave this many output rows per block


def _group_rows(t: torch.Tensor, pad_value: float = 0) -> torch.Tensor:
    """(out, nb, *rest) -> (ceil(out/16), nb, 16, *rest): rows padded to a multiple of 16, then grouped per block."""
    out_f = t.shape[0]
    pad = -out_f % GROUP_ROWS
    if pad:
        t = torch.cat([t, torch.full((pad, *t.shape[1:]), pad_value, dtype=t.dtype)])
    t = t.reshape(-1, GROUP_ROWS, *t.shape[1:])
    return t.transpose(1, 2)


def _grouped_nibbles(u: torch.Tensor) -> torch.Tensor:
    """Codes (out, in) 0..15 -> (groups, nb, 256) uint8: part k (64 bytes) holds bytes 4k..4k+3 of each row's
    16 nibble bytes (byte j = code j | code j+16 << 4), row after row."""
    nib = _pack_nibbles(u).reshape(u.shape[0], -1, 4, 4)  # (out, nb, part, byte)
    g = _group_rows(nib)  # (groups, nb, 16 rows, part, byte)
    return g.permute(0, 1, 3, 2, 4).reshape(g.shape[0], g.shape[1], 256)


def _grouped_bytes(t: torch.Tensor) -> torch.Tensor:
    """(out, nb) tensor -> (groups, nb, 16 * itemsize) uint8: the 16 rows' values of each block, row order."""
    g = _group_rows(t).contiguous()
    return g.view(torch.uint8).reshape(g.shape[0], g.shape[1], -1)


def pack_q8i(q: torch.Tensor) -> torch.Tensor:
    """int8 codes (out, in) -> (ceil(out/16), in/32, 512) uint8, per group of 16 rows and block: codes + 128,
    codes 4k..4k+3 of row r at bytes 64k + 4r (padding rows: code 0)."""
    out_f, in_f = q.shape
    u = (q.to(torch.int16) + 128).to(torch.uint8).reshape(out_f, in_f // Q4_GROUP, 8, 4)
    g = _group_rows(u, 128)  # (groups, nb, 16 rows, 8, 4)
    return g.permute(0, 1, 3, 2, 4).reshape(g.shape[0], g.shape[1], 512).contiguous()


def pack_q5i(u: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Codes u (out, in) in 0..31 and d (out, in/32) fp16 -> (ceil(out/16), in/32, 352) uint8, per group of 16
    rows and block: {fp16 d[16]; u32 qh[16]; nibbles (see _grouped_nibbles)}; padding rows are zero weights."""
    out_f, in_f = u.shape
    nb = in_f // Q4_GROUP
    hi = (u >> 4).to(torch.int64).reshape(out_f, nb, Q4_GROUP)
    qh = (hi << torch.arange(Q4_GROUP)).sum(-1).to(torch.int32)  # bit j = high bit of code j (fits: < 2^32)
    # padding rows get d = 0: zero weights whatever their codes
    return torch.cat([_grouped_bytes(d.contiguous()), _grouped_bytes(qh), _grouped_nibbles(u & 15)], -1).contiguous()


def pack_q4i(u: torch.Tensor, scale: torch.Tensor, lo: torch.Tensor) -> torch.Tensor:
    """Codes u (out, in) in 0..15, scale and lo (out, in/32) fp32 -> (ceil(out/16), in/32, 384) uint8, per group
    of 16 rows and block: {fp32 scale[16]; fp32 lo[16]; nibbles (see _grouped_nibbles)}."""
    return torch.cat([_grouped_bytes(scale.to(torch.float32)), _grouped_bytes(lo.to(torch.float32)),
                      _grouped_nibbles(u)], -1).contiguous()


def int4pack_codes(packed: torch.Tensor, out_f: int, in_f: int) -> torch.Tensor:
    """torch's CPU int4pack back to codes (out, in) uint8. Rows come in blocks of N (64 on AVX-512 builds, 32
    on AVX2): per input column N/2 bytes, byte j = row j | row j + N/2 << 4."""
    n = int4pack_block_rows()
    p = packed.view(torch.uint8).reshape(out_f // n, in_f, n // 2)
    u = torch.stack([p & 15, p >> 4], 1)  # (out/n, 2, in, n/2)
    return u.permute(0, 1, 3, 2).reshape(out_f, in_f)


@functools.cache
def int4pack_block_rows() -> int:
    """The row block of this machine's int4pack layout, found by packing known codes (torch picks it by ISA)."""
    q = (torch.arange(128 * 64, dtype=torch.int32).reshape(128, 64) * 7 + 3) % 16
    p = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1).view(torch.uint8)
    for n in (64, 32, 16, 8):
        u = torch.stack([p.reshape(128 // n, 64, n // 2) & 15, p.reshape(128 // n, 64, n // 2) >> 4], 1)
        if torch.equal(u.permute(0, 1, 3, 2).reshape(128, 64).to(torch.int32), q):
            return n
    raise RuntimeError("unknown int4pack layout in this torch build")


def quantize_int8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-channel int8: (q (out, in) int8, scale (out,) fp32)."""
    scale = weight.abs().amax(dim=1).clamp_min(1e-30) / 127
    q = torch.round(weight / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale


def q4k_to_int4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """Recover exact int4 group-32 codes from a dequantized Q4_K weight, or None if it is not one.

    Each group of 32 holds values lo + k*s for integers k in 0..15 (s = d*sc, lo = -dmin*m).
    For n = 15 down to 1 we test whether (max - min) / n puts every value of a group on that grid;
    any n that fits reproduces the group exactly (most groups use all 16 levels and fit at n = 15).
    Returns q (out, in) int32 0..15, scale and zero (in/32, out) in torch's (q - 8) * scale + zero.
    """
    out_f, in_f = weight.shape
    if in_f % Q4_GROUP or out_f % 16:  # int4pack needs out % 16 == 0
        return None
    g = weight.to(torch.float64).reshape(-1, Q4_GROUP)  # (groups, 32), row-major over (out, in/32)
    lo = g.amin(-1)
    span = g.amax(-1) - lo
    step = torch.zeros_like(span)
    todo = (span > 0).nonzero().flatten()  # constant groups keep step 0: (q - 8) * 0 + lo
    for n in range(15, 0, -1):
        s = span[todo] / n
        r = (g[todo] - lo[todo, None]) / s[:, None]
        fits = (r - r.round()).abs().amax(-1) < 1e-3
        step[todo[fits]] = s[fits]
        todo = todo[~fits]
        if todo.numel() == 0:
            break
    if todo.numel():
        return None
    g, lo, step = g.reshape(out_f, -1, Q4_GROUP), lo.reshape(out_f, -1), step.reshape(out_f, -1)
    q = torch.round((g - lo[..., None]) / torch.where(step > 0, step, 1.0)[..., None]).to(torch.int32)
    scale, zero = step, lo + 8 * step
    recon = (q - 8) * scale[..., None] + zero[..., None]
    if float((recon - g).abs().max()) > 1e-6 * max(float(g.abs().max()), 1e-30):
        return None
    return (q.reshape(out_f, in_f), scale.t().to(torch.float32).contiguous(), zero.t().to(torch.float32).contiguous())


_NO_PLAN = ()  # a Linear's small-M plan when the kernel is off or does not fit its shape


class Linear:
    """y = x @ W.T (+ bias) over one stored format; one matmul for every M (prefill, decode, verify)."""

    kind: str = "fp32"
    cat_dims: tuple = (0,)  # per part: the dim that is the output dim (for fuse_linears)
    _plan = None  # small-M kernel call args (cpu_kernels.Kernel.plan), built at first use
    _segments = None  # kernel segments mapped from disk (runtime.kernel_packs); None: built by the first plan

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        self.weight, self.bias = weight, bias  # (out, in) fp32
        self.out_features, self.in_features = weight.shape

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """x (M, in) fp32 -> (M, out) fp32."""
        return torch.nn.functional.linear(x, self.weight, self.bias)

    def dequantize(self) -> torch.Tensor:
        return self.weight

    def parts(self) -> tuple:
        return (self.weight,)

    def __getattr__(self, name: str):
        """Only for attributes not set: a fused linear's tensors, concatenated from its parts at first use. The
        kernel reads its own layout (a kernel pack), so on that path the copy is never made."""
        parts = self.__dict__.get("_unfused")
        if parts is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        del self.__dict__["_unfused"]
        q5_rows = self.__dict__.get("q5_rows")
        cat = tuple(torch.cat([lin.parts()[i] for lin in parts], dim=d) for i, d in enumerate(self.cat_dims))
        type(self).__init__(self, *cat, bias=self.bias)
        if q5_rows is not None:
            self.q5_rows = q5_rows
        return getattr(self, name)

    # --- every M through runtime/cpu_kernels --------------------------------------------------------
    def kernel_segments(self) -> list[tuple] | None:
        """(fmt, data, q8i row scales or None, first output column, rows) for the kernel; None: torch only."""
        return None

    def use_kernel_segments(self, segments: list[tuple]) -> None:
        """Run the kernel over `segments` (what kernel_segments() returns, kept elsewhere) instead of building them."""
        self._segments, self._plan = segments, None

    def kernel_matmul(self, x: torch.Tensor) -> torch.Tensor | None:
        """The kernel's result (in pieces of up to AGENT_CPU_KERNEL_MAX_M rows), or None when torch's path should run."""
        plan = self._plan
        if plan is None:
            plan = self._plan = self._make_plan()
        if plan is _NO_PLAN:
            return None
        if x.stride(-1) != 1 or x.dtype != torch.float32:
            x = x.contiguous().float()
        step = _MAX_M[0]
        if x.shape[0] <= step:
            return plan[0].linear(x, plan[1], self.out_features, self.bias)
        return torch.cat([plan[0].linear(x[i:i + step], plan[1], self.out_features, self.bias)
                          for i in range(0, x.shape[0], step)])

    def _make_plan(self):
        if self.in_features % Q4_GROUP:
            return _NO_PLAN
        k = cpu_kernels.kernel()
        if k is None or k.isa == 0:  # the portable C path is slower than torch: tests call it directly
            return _NO_PLAN
        segments = self._segments if self._segments is not None else self.kernel_segments()
        if not segments:
            return _NO_PLAN
        self._keep = segments  # the plan holds raw pointers into these tensors
        return (k, k.plan(segments))


_MAX_M = [cpu_kernels.max_m()]


def reset_kernel_state(linears=()) -> None:
    """Re-read AGENT_CPU_KERNEL / AGENT_CPU_KERNEL_MAX_M (for tests and benchmarks) and drop the plans of `linears`."""
    _MAX_M[0] = cpu_kernels.max_m()
    cpu_kernels.reset()
    for lin in linears:
        lin._plan = None


def block_quantize(x: torch.Tensor) -> torch.Tensor:
    """x (M, K), K % 32 == 0, rounded as the kernel rounds activations: per block of 32, d = max|x| / 127 and
    x -> d * round(x * (127 / max|x|)) (an all-zero block stays zero)."""
    M, K = x.shape
    xb = x.reshape(M, K // Q4_GROUP, Q4_GROUP)
    amax = xb.abs().amax(-1, keepdim=True)
    q = torch.round(xb * torch.where(amax > 0, 127 / amax, 0.0)).clamp_(-127, 127)
    return q.mul_(amax / 127).reshape(M, K)


class Int8Linear(Linear):
    """int8 per-channel weights; activations block-rounded, then two int8 planes (see the module docstring).

    q5i: for output rows that came from an exact Q5_0 weight, its grouped blocks (pack_q5i; the small-M kernel
    reads those instead of the int8 rows); `q5_rows` says which rows have them, as (first row, rows, q5i) ranges."""

    kind = "int8"
    cat_dims = (0, 0)

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None,
                 q5i: torch.Tensor | None = None):
        self.q, self.scale, self.bias = q, scale, bias  # (out, in) int8, (out,) fp32
        self.out_features, self.in_features = q.shape
        self.q5_rows: list[tuple[int, int, torch.Tensor]] = [] if q5i is None else [(0, self.out_features, q5i)]

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        y = self.kernel_matmul(x)
        if y is not None:
            return y
        M = x.shape[0]
        x = block_quantize(x)
        step = x.abs().amax(dim=1, keepdim=True).clamp_min_(1e-30) / 127  # (M, 1)
        hi = torch.round(x / step)  # |hi| <= 127
        lo = torch.round((x - hi * step) * (254 / step))  # residual in steps of step/254; |lo| <= 127
        y = torch._int_mm(torch.cat([hi, lo]).to(torch.int8), self.q.t()).to(torch.float32)  # (2M, out), exact sums
        y = torch.add(y[:M], y[M:], alpha=1 / 254).mul_(step).mul_(self.scale)
        return y if self.bias is None else y.add_(self.bias)

    def kernel_segments(self) -> list[tuple]:
        segs, row = [], 0
        for first, rows, q5i in [*self.q5_rows, (self.out_features, 0, None)]:
            if first > row:  # int8 rows before this Q5_0 range, regrouped for the kernel (a copy)
                segs.append((cpu_kernels.FMT_Q8I, pack_q8i(self.q[row:first]), self.scale[row:first].contiguous(), row,
                             first - row))
            if rows:
                segs.append((cpu_kernels.FMT_Q5I, q5i, None, first, rows))
            row = first + rows
        return segs

    def dequantize(self) -> torch.Tensor:
        return self.q.to(torch.float32) * self.scale[:, None]

    def parts(self) -> tuple:
        return (self.q, self.scale)


class Int4Linear(Linear):
    """Exact Q4_K codes, group 32: torch's int4pack as stored; our kernel reads them repacked (q4i blocks with the
    exact fp32 scales, built at first use). With the kernel off, torch's int4 path (bf16 activations, scales and
    outputs) runs instead."""

    kind = "int4"
    cat_dims = (0, 1)

    def __init__(self, packed: torch.Tensor, scales_zeros: torch.Tensor, bias: torch.Tensor | None = None):
        self.packed, self.scales_zeros, self.bias = packed, scales_zeros, bias  # sz: (in/32, out, 2) fp32
        self.out_features = scales_zeros.shape[1]
        self.in_features = scales_zeros.shape[0] * Q4_GROUP

    @functools.cached_property
    def sz_bf16(self) -> torch.Tensor:
        """Scales and zeros for torch's int4 path, made when that path first runs (the kernel reads its own)."""
        return self.scales_zeros.to(torch.bfloat16)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        y = self.kernel_matmul(x)
        if y is not None:
            return y
        x = block_quantize(x)
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.to(torch.bfloat16), self.packed, Q4_GROUP, self.sz_bf16)
        y = y.to(torch.float32)
        return y if self.bias is None else y.add_(self.bias)

    def _codes_scale_lo(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """codes (out, in) uint8, scale and lo (out, in/32) fp32: w = lo + scale * code."""
        u = int4pack_codes(self.packed, self.out_features, self.in_features)
        scale, zero = self.scales_zeros[..., 0].t(), self.scales_zeros[..., 1].t()  # (out, in/32)
        return u, scale.contiguous(), (zero - 8 * scale).contiguous()  # (q - 8) * scale + zero == lo + q * scale

    def exact_weight(self) -> torch.Tensor:
        """(out, in) fp32 lo + scale * code, as the kernel's q4i blocks compute it."""
        u, scale, lo = self._codes_scale_lo()
        g = u.reshape(self.out_features, -1, Q4_GROUP).to(torch.float32)
        return torch.addcmul(lo[..., None], g, scale[..., None]).reshape(self.out_features, self.in_features)

    def kernel_segments(self) -> list[tuple]:
        """The same codes repacked for the kernel (pack_q4i: 24 B per 32 weights, fp32 scale and lo, 16 B of nibbles)."""
        return [(cpu_kernels.FMT_Q4I, pack_q4i(*self._codes_scale_lo()), None, 0, self.out_features)]

    def dequantize(self) -> torch.Tensor:
        eye = torch.eye(self.in_features)  # fp32 kernel path: exact up to fp32 rounding
        return torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.packed, Q4_GROUP, self.scales_zeros).t().contiguous()

    def parts(self) -> tuple:
        return (self.packed, self.scales_zeros)


def load_linear(tensors: dict[str, torch.Tensor], name: str, bias: torch.Tensor | None = None) -> Linear:
    """The Linear for GGUF weight `name` (e.g. "blk.0.attn_q.weight"), whatever format it was stored in."""
    if name + ".q8" in tensors:
        return Int8Linear(tensors[name + ".q8"], tensors[name + ".q8_scale"], bias, tensors.get(name + ".q5i"))
    if name + ".q4" in tensors:
        return Int4Linear(tensors[name + ".q4"], tensors[name + ".q4_sz"], bias)
    if name in tensors:
        return Linear(tensors[name], bias)
    raise KeyError(f"weight {name} missing from the tensors dict")


def fuse_linears(linears: list[Linear]) -> list[Linear]:
    """Concatenate along the output dim when all share one format (one matmul instead of several)."""
    kinds = {type(lin) for lin in linears}
    if len(kinds) != 1 or (Int4Linear in kinds and any(lin.out_features % 64 for lin in linears)):
        return linears  # int4pack rows are packed in blocks of 64: only whole blocks concatenate
    cls = kinds.pop()
    biases = [lin.bias for lin in linears]
    if all(b is None for b in biases):
        bias = None
    else:
        bias = torch.cat([b if b is not None else torch.zeros(lin.out_features) for b, lin in zip(biases, linears)])
    fused = cls.__new__(cls)  # its tensors are concatenated at first use (Linear.__getattr__)
    fused.bias, fused._unfused = bias, list(linears)
    fused.out_features, fused.in_features = sum(lin.out_features for lin in linears), linears[0].in_features
    if cls is Int8Linear:  # keep each part's exact Q5_0 rows, shifted to their place in the fused output
        fused.q5_rows, row = [], 0
        for lin in linears:
            fused.q5_rows += [(row + first, rows, q5i) for first, rows, q5i in lin.q5_rows]
            row += lin.out_features
    return [fused]


class Embedding:
    """Token embedding lookup that dequantizes only the looked-up rows."""

    def __init__(self, tensors: dict[str, torch.Tensor], name: str = "token_embd.weight"):
        if name + ".q8" in tensors:
            self.q, self.scale = tensors[name + ".q8"], tensors[name + ".q8_scale"]
        else:
            self.q, self.scale = tensors[name], None

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens (T,) int64 -> (T, hidden) fp32."""
        rows = self.q[tokens].to(torch.float32)
        return rows if self.scale is None else rows.mul_(self.scale[tokens, None])

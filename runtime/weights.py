"""CPU weight formats: what prepare_tensor stores for each GGUF tensor, and the matmul over it.

Stored formats (keys in the tensors dict, per GGUF tensor `name`):
  fp32  {name: (out, in) float32}                       norms, biases, tests' reference
  int8  {name.q8: (out, in) int8, name.q8_scale: (out,) float32}
        w = q * scale[row]; every 2-D tensor that is not an exact Q4_K (Q5_0, Q8_0, Q6_K, F16, ...)
  int4  {name.q4: packed uint8, name.q4_sz: (in/32, out, 2) float32}
        torch's CPU int4pack, group 32: w = (q - 8) * scale + zero, q in 0..15. A Q4_K
        block (w = d*sc*q - dmin*m, sub-blocks of 32) is recovered exactly from the fp32
        dequantized weight, so this path adds no error beyond fp32 rounding.

Matmul kernels (chosen by measurement on a 2-core AVX-512 dev machine; numbers in the module report):
  int8: activations split per row into two int8 planes, x ~= step * (hi + lo / 254), both
        multiplied in one torch._int_mm (int32 accumulate) and recombined in fp32. The
        activation error is ~1/32000 of the row's max, so logits match int8 weights with fp32
        activations (one plane alone costs ~7x more KL vs fp32); rows are independent, so a verify
        pass of k rows gives what k decodes give; M=2k rows cost little more than M=k.
  int4: torch's _weight_int4pack_mm_for_cpu with bf16 activations (the fp32 path is ~10x slower).
"""
from __future__ import annotations

import torch

FORMAT_ID = "cpu-int8pc-q4k-int4g32-v1"  # bump whenever what prepare_tensor stores changes
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
    return {name + ".q8": q, name + ".q8_scale": scale}


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


class Linear:
    """y = x @ W.T (+ bias) over one stored format; one matmul for every M (prefill, decode, verify)."""

    kind: str = "fp32"
    cat_dims: tuple = (0,)  # per part: the dim that is the output dim (for fuse_linears)

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

    @classmethod
    def from_parts(cls, parts: tuple, bias: torch.Tensor | None) -> "Linear":
        return cls(*parts, bias=bias)


class Int8Linear(Linear):
    """int8 per-channel weights; activations as two int8 planes (see the module docstring)."""

    kind = "int8"
    cat_dims = (0, 0)

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None):
        self.q, self.scale, self.bias = q, scale, bias  # (out, in) int8, (out,) fp32
        self.out_features, self.in_features = q.shape

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        M = x.shape[0]
        step = x.abs().amax(dim=1, keepdim=True).clamp_min_(1e-30) / 127  # (M, 1)
        hi = torch.round(x / step)  # |hi| <= 127
        lo = torch.round((x - hi * step) * (254 / step))  # residual in steps of step/254; |lo| <= 127
        y = torch._int_mm(torch.cat([hi, lo]).to(torch.int8), self.q.t()).to(torch.float32)  # (2M, out), exact sums
        y = torch.add(y[:M], y[M:], alpha=1 / 254).mul_(step).mul_(self.scale)
        return y if self.bias is None else y.add_(self.bias)

    def dequantize(self) -> torch.Tensor:
        return self.q.to(torch.float32) * self.scale[:, None]

    def parts(self) -> tuple:
        return (self.q, self.scale)


class Int4Linear(Linear):
    """torch int4pack, group 32; bf16 activations into the kernel, fp32 out."""

    kind = "int4"
    cat_dims = (0, 1)

    def __init__(self, packed: torch.Tensor, scales_zeros: torch.Tensor, bias: torch.Tensor | None = None):
        self.packed, self.scales_zeros, self.bias = packed, scales_zeros, bias  # sz: (in/32, out, 2) fp32
        self.sz_bf16 = scales_zeros.to(torch.bfloat16)
        self.out_features = scales_zeros.shape[1]
        self.in_features = scales_zeros.shape[0] * Q4_GROUP

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.to(torch.bfloat16), self.packed, Q4_GROUP, self.sz_bf16)
        y = y.to(torch.float32)
        return y if self.bias is None else y.add_(self.bias)

    def dequantize(self) -> torch.Tensor:
        eye = torch.eye(self.in_features)  # fp32 kernel path: exact up to fp32 rounding
        return torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.packed, Q4_GROUP, self.scales_zeros).t().contiguous()

    def parts(self) -> tuple:
        return (self.packed, self.scales_zeros)


def load_linear(tensors: dict[str, torch.Tensor], name: str, bias: torch.Tensor | None = None) -> Linear:
    """The Linear for GGUF weight `name` (e.g. "blk.0.attn_q.weight"), whatever format it was stored in."""
    if name + ".q8" in tensors:
        return Int8Linear(tensors[name + ".q8"], tensors[name + ".q8_scale"], bias)
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
    parts = tuple(torch.cat([lin.parts()[i] for lin in linears], dim=d) for i, d in enumerate(cls.cat_dims))
    biases = [lin.bias for lin in linears]
    if all(b is None for b in biases):
        bias = None
    else:
        bias = torch.cat([b if b is not None else torch.zeros(lin.out_features) for b, lin in zip(biases, linears)])
    return [cls.from_parts(parts, bias)]


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

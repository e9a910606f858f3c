"""Triton kernels for the CUDA path, each beside the torch reference it is tested against.

Modules (kernel entry point / torch reference):
  norm.py       rms_norm / rms_norm_ref            fused RMSNorm, optionally adding a residual first
  rope.py       rope_ / rope_ref                   RoPE in place from a cos/sin table gathered at positions;
                rope_qkv_                          q rotated in place, k rotated and v copied into the KV cache
  attention.py  decode_attention, verify_attention / attention_ref
                GQA-aware, split along the sequence (flash-decoding); the total length is read from
                a device tensor so one launch (or one CUDA graph) serves every cache length
  quant.py      int8_matmul / int8_matmul_ref, int4_matmul / int4_matmul_ref (weight-only, group 32)
  dense.py      dense_matmul / dense_matmul_ref     bf16 weights, M <= 16, a row's result independent of M
  activation.py silu_mul / silu_mul_ref            SiLU(gate) * up of a fused gate|up output

Nothing in runtime/kernels imports the rest of runtime, or agent; runtime/__init__.py is only a docstring, so
importing runtime.kernels imports no triton before the switch below. (The package lives under runtime/ because a
top-level `kernels` collides with the PyPI package of that name, which Hugging Face's stack can install.)
Kernels run on CUDA tensors, and on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1, set before
triton is imported), which is how the tests run.

Every tl.dot takes fp32 operands (the interpreter's tl.dot mishandles bf16) and names its input precision on
purpose, so that the products are exact: attention "ieee" (its scores and probabilities are fp32 values); the
matmuls `dot_precision(dtype)`: "tf32" for 16-bit activations, which tf32 holds exactly beside bf16 weights or
integer codes, "ieee" for fp32 ones. The interpreter computes every dot in full fp32 whatever the precision,
so tests/kernels derive each tolerance from the precision a kernel uses (tests/kernels/kernel_tolerance.py),
which bounds the GPU's result and the interpreter's alike.
"""
import os as _os

import torch as _torch

if not _torch.cuda.is_available():
    # Without CUDA the interpreter is the only way these kernels run; it must be on before any
    # @triton.jit function is defined (the decorator reads it), i.e. before the submodules import.
    _os.environ.setdefault("TRITON_INTERPRET", "1")
# Whether the kernels run in the interpreter (host tensors) or compiled (CUDA tensors only): fixed at import.
INTERPRETED = _os.environ.get("TRITON_INTERPRET") == "1"


def dot_precision(*dtypes: _torch.dtype) -> str:
    """tl.dot input precision for a matmul whose float operands have these dtypes: "tf32" when all are 16-bit
    (tf32's 10 stored bits hold them exactly, so its products are exact on the tensor cores), else "ieee"."""
    return "tf32" if all(d in (_torch.bfloat16, _torch.float16) for d in dtypes) else "ieee"

"""CUDA execution: the Qwen2 forward on a GPU with bf16 weights, the KV cache on the device, Triton kernels
(runtime/kernels/) and CUDA graphs for decode and verify.

    loaded = load_model_files(path, cuda.prepare_tensor, cuda.FORMAT_ID, cache_dir, progress)
    model = cuda.build_cuda_model(loaded.config, loaded.tensors)      # CudaModel
    cache = model.new_cache(model_id=...)                             # CudaKVCache (a KVCache on the GPU)
    logits = model.forward(tokens, positions, cache, last_only=...)   # same contract as Qwen2Model.forward

Weights: `prepare_tensor` stores 2-D tensors as bf16 (dequantized once at conversion) and 1-D ones as fp32,
so the converted cache maps straight into GPU copies. build_cuda_model also accepts the CPU formats of
runtime.weights (int8 rows, int4 packs; dequantized here) or fp32. `weights="int8"` / `"int4"` keep the
projections quantized on the GPU and run them through runtime.kernels.quant; int4 applies to the weights that
runtime.weights stored as exact Q4_K int4 (so "int4" wants its tensors), int8 to the rest.

Per layer (T new tokens): fused add+RMSNorm into an fp32 residual stream -> fused q|k|v projection -> RoPE
in place (Triton) -> K/V scattered into the cache at `positions` (index_copy_) -> attention
(runtime.kernels.attention for T <= 16: GQA, split along the sequence at fixed places, length read from a
device tensor; SDPA for prefill chunks) -> output projection -> fused add+RMSNorm -> gate|up -> SiLU*up -> down.
Projections with T <= 16 run runtime.kernels.dense (bf16) or runtime.kernels.quant, whose rows do not depend
on the other rows, and attention's rows do not either: a verify row is bit-equal to the decode step it stands
for, so greedy speculation is lossless on the GPU as on the CPU. Prefill chunks (T > 16) take cuBLAS and SDPA.
Nothing on the T <= 16 path depends on the cache length on the host, so one captured CUDA graph per
(cache buffers, T, last_only) replays for every length: T in GRAPH_SIZES = (1, 2, 4, 8, 16); other
T <= 16 run a larger graph padded with the last token (the pad rows write K/V past the new length, which
the cache never commits). Graphs are kept on the cache (its buffers are baked in) and dropped when it grows.
`use_triton=False` is the eager-torch baseline (torch norms/RoPE, SDPA; no graphs).

Logits come back as fp32 on the CPU (what runtime.generate and the samplers expect) unless
`model.logits_to_cpu` is False (benchmarks).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from runtime.config import ModelConfig
from runtime.kernels import INTERPRETED
from runtime.kernels.activation import silu_mul
from runtime.kernels.attention import verify_attention
from runtime.kernels.dense import dense_matmul
from runtime.kernels.norm import rms_norm, rms_norm_ref
from runtime.kernels.quant import int4_matmul, int8_matmul, pack_int4, quantize_int8
from runtime.kernels.rope import rope_, rope_qkv_, rope_ref
from runtime.kv_cache import BranchKV, KVCache
from runtime.model import branch_attention
from runtime.weights import Embedding, load_linear, q4k_to_int4

FORMAT_ID = "cuda-bf16-v1"  # what prepare_tensor stores; bump when that changes
GRAPH_SIZES = (1, 2, 4, 8, 16)  # T values with a captured graph (decode and verify k in {2, 4, 8, 16})
MAX_KERNEL_T = 16  # T above this (prefill chunks) uses SDPA for attention
WEIGHT_MODES = ("bf16", "int8", "int4")


def available() -> bool:
    return torch.cuda.is_available()


def prepare_tensor(name: str, weight: torch.Tensor, ggml_type_name: str) -> dict[str, torch.Tensor]:
    """load_model_files hook for the CUDA path: 2-D tensors bf16, the rest (norms, biases) fp32."""
    weight = weight.detach().to(torch.float32).contiguous()
    return {name: weight if weight.dim() < 2 else weight.to(torch.bfloat16)}


# --- weights ------------------------------------------------------------------------------------

def _dense(tensors: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """A weight as a dense float tensor (CPU), whatever format the tensors dict holds it in."""
    if name in tensors:
        return tensors[name]
    if name + ".q8" in tensors or name + ".q4" in tensors:
        return load_linear(tensors, name).dequantize()
    raise KeyError(f"weight {name} missing from the tensors dict")


class DeviceLinear:
    """y = x @ W.T (+ bias) on the device: bf16 dense (runtime.kernels.dense for up to 16 rows, else cuBLAS), or int8 /
    int4 weight-only (runtime.kernels.quant)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None, *, mode: str, device, dtype,
                 int4_exact: bool = True):
        self.out_features, self.in_features = weight.shape
        self.bias = bias.to(device=device, dtype=dtype) if bias is not None else None
        self.kind = "bf16"
        if mode == "int4":  # only weights known to be 4-bit groups (int4_exact) are tried: the search is slow
            exact = q4k_to_int4(weight.float()) if int4_exact and self.in_features % 64 == 0 else None
            if exact is not None:
                codes, scale, zero = exact  # scale/zero (in/32, out)
                self.packed = pack_int4(codes).to(device)
                self.scale = scale.t().contiguous().to(device)
                self.zero = zero.t().contiguous().to(device)
                self.kind = "int4"
                return
            mode = "int8"  # not a 4-bit-group weight (Q5_0, Q6_K, Q8_0 ...): int8 rows
        if mode == "int8":
            q, scale = quantize_int8(weight.float())
            self.q, self.scale = q.to(device), scale.to(device)
            self.kind = "int8"
            return
        self.weight = weight.to(device=device, dtype=dtype).contiguous()

    def __call__(self, x: torch.Tensor, kernel: bool = False) -> torch.Tensor:
        """kernel: take runtime.kernels.dense for a bf16 weight (up to 16 rows: a row's result independent of the
        others, so verify rows equal decode steps bit for bit); False is the eager-torch baseline's cuBLAS."""
        if self.kind == "int8":
            return int8_matmul(x, self.q, self.scale, self.bias)
        if self.kind == "int4":
            return int4_matmul(x, self.packed, self.scale, self.zero, self.bias)
        if kernel and x.shape[0] <= MAX_KERNEL_T:
            return dense_matmul(x, self.weight, self.bias)
        return F.linear(x, self.weight, self.bias)

    @property
    def nbytes(self) -> int:
        """Bytes one matmul reads (weights + scales + bias): the roofline's numerator."""
        parts = {"bf16": ("weight",), "int8": ("q", "scale"), "int4": ("packed", "scale", "zero")}[self.kind]
        n = sum(getattr(self, p).nbytes for p in parts)
        return n + (self.bias.nbytes if self.bias is not None else 0)


class DeviceEmbedding:
    """The token table on the device; embed(ids) takes ids on any device (a Qwen2Model.embed look-alike)."""

    def __init__(self, weight: torch.Tensor):
        self.weight = weight

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weight.index_select(0, ids.to(self.weight.device))


@dataclass
class DeviceBlock:
    attn_norm: torch.Tensor
    qkv: DeviceLinear
    attn_output: DeviceLinear
    ffn_norm: torch.Tensor
    gate_up: DeviceLinear
    ffn_down: DeviceLinear
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None


# --- KV cache on the device ----------------------------------------------------------------------

class CudaKVCache(KVCache):
    """runtime.kv_cache.KVCache with its K/V buffers on the device (bf16); same invariant and methods.

    `graphs` holds the CUDA graphs captured over these buffers; growing the buffers drops them.
    """

    def __init__(self, config: ModelConfig, *, model_id: str = "", dtype: torch.dtype = torch.bfloat16,
                 capacity: int = 1024, device: torch.device | str = "cuda"):
        self.config, self.model_id, self.dtype, self.device = config, model_id, dtype, torch.device(device)
        self.tokens: list[int] = []
        capacity = max(1, min(capacity, config.context_length))
        shape = (config.num_layers, config.num_kv_heads, capacity, config.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=self.device)
        self.v = torch.zeros(shape, dtype=dtype, device=self.device)
        self.graphs: dict = {}

    def reserve(self, n: int) -> None:
        grows = n > self.capacity
        super().reserve(n)  # new buffers on the same device
        if grows:
            self.graphs = {}  # they point at the old buffers

    def fork(self, n: int | None = None) -> "CudaKVCache":
        n = self.length if n is None else n
        assert 0 <= n <= self.length
        child = CudaKVCache(self.config, model_id=self.model_id, dtype=self.dtype, capacity=max(n, 1024), device=self.device)
        child.k[:, :, :n] = self.k[:, :, :n]
        child.v[:, :, :n] = self.v[:, :, :n]
        child.tokens = self.tokens[:n]
        return child

    def to_cpu(self) -> KVCache:
        cpu = KVCache(self.config, model_id=self.model_id, dtype=self.dtype, capacity=max(self.length, 1))
        cpu.k[:, :, : self.length] = self.k[:, :, : self.length].cpu()
        cpu.v[:, :, : self.length] = self.v[:, :, : self.length].cpu()
        cpu.tokens = list(self.tokens)
        return cpu

    @classmethod
    def from_cpu(cls, cpu: KVCache, device: torch.device | str = "cuda", dtype: torch.dtype | None = None) -> "CudaKVCache":
        n, dtype = cpu.length, dtype or cpu.dtype
        cache = cls(cpu.config, model_id=cpu.model_id, dtype=dtype, capacity=max(n, 1024), device=device)
        cache.k[:, :, :n] = cpu.k[:, :, :n].to(device=cache.device, dtype=dtype)
        cache.v[:, :, :n] = cpu.v[:, :, :n].to(device=cache.device, dtype=dtype)
        cache.tokens = list(cpu.tokens)
        return cache

    def save(self, path: str | Path) -> None:
        self.to_cpu().save(path)  # the same file format as a CPU cache (atomic write there)

    @classmethod
    def load(cls, path: str | Path, config: ModelConfig, *, model_id: str = "",
             device: torch.device | str = "cuda", dtype: torch.dtype | None = None) -> "CudaKVCache":
        """Read a file written by save (or by a CPU KVCache); dtype None keeps the file's."""
        return cls.from_cpu(KVCache.load(path, config, model_id=model_id), device, dtype)


# --- the model -----------------------------------------------------------------------------------

@dataclass
class _Graph:
    graph: "torch.cuda.CUDAGraph | None"  # None: emulated (CPU tests)
    inp: torch.Tensor  # (2T + 1,) int64 on the device: tokens, positions, total length
    out: torch.Tensor | None  # logits written by every replay


class CudaModel:
    """forward(tokens, positions, cache, last_only) -> logits, like runtime.model.Qwen2Model, on a device."""

    prefill_chunk = 1024

    def __init__(self, config: ModelConfig, embed: DeviceEmbedding, blocks: list[DeviceBlock], output_norm: torch.Tensor,
                 head: DeviceLinear, *, device, dtype=torch.bfloat16, use_triton: bool = True, graphs: bool | str = True):
        self.config, self.embed, self.blocks, self.output_norm, self.head = config, embed, blocks, output_norm, head
        self.device, self.dtype = torch.device(device), dtype
        if use_triton and self.device.type != "cuda" and not INTERPRETED:
            # Compiled Triton kernels cannot read host memory ("cannot be accessed from Triton (cpu tensor?)").
            raise ValueError(f"runtime.cuda: Triton kernels on device {self.device} need Triton's interpreter "
                             "(TRITON_INTERPRET=1 before triton is imported); build on CUDA or pass use_triton=False")
        self.use_triton = use_triton
        # runtime.kernels.dense for bf16 projections of T <= 16 rows (bit-equal verify and decode rows); False takes
        # cuBLAS there as well (bench/gpu.py measures both)
        self.dense_kernel = True
        # graphs: True captures CUDA graphs on a CUDA device; "emulate" runs the same static-buffer, padded
        # path without capture (how the tests exercise it on CPU).
        self.graph_mode = None
        if use_triton and graphs == "emulate":
            self.graph_mode = "emulate"
        elif use_triton and graphs and self.device.type == "cuda":
            self.graph_mode = "cuda"
        self.use_graphs = self.graph_mode is not None
        self.logits_to_cpu = True
        half = config.head_dim // 2
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(half, dtype=torch.float64) / half))
        angles = torch.outer(torch.arange(config.context_length, dtype=torch.float64), inv_freq)
        self.rope_cos = angles.cos().float().to(self.device).contiguous()
        self.rope_sin = angles.sin().float().to(self.device).contiguous()
        self._pool = torch.cuda.graph_pool_handle() if self.graph_mode == "cuda" else None
        self.graph_captures = 0  # graphs captured so far (tests, benchmarks)

    def new_cache(self, *, model_id: str = "", capacity: int = 1024) -> CudaKVCache:
        return CudaKVCache(self.config, model_id=model_id, dtype=self.dtype, capacity=capacity, device=self.device)

    def load_cache(self, path: str | Path, *, model_id: str = "") -> CudaKVCache:
        return CudaKVCache.load(path, self.config, model_id=model_id, device=self.device, dtype=self.dtype)

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights one decode step reads (every projection, norms, the head; one embedding row)."""
        n = self.head.nbytes + self.output_norm.nbytes + self.embed.weight[0].nbytes
        for b in self.blocks:
            n += sum(lin.nbytes for lin in (b.qkv, b.attn_output, b.gate_up, b.ffn_down))
            n += b.attn_norm.nbytes + b.ffn_norm.nbytes
        return n

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, cache: CudaKVCache, *, last_only: bool = False) -> torch.Tensor:
        """tokens, positions (T,) (any device) -> logits (T, vocab) or (1, vocab) with last_only; the cache grows by T."""
        T = int(tokens.shape[0])
        assert T > 0 and positions.shape == (T,) and int(positions[0]) == cache.length, (T, positions[:1], cache.length)
        assert cache.device == self.device, (cache.device, self.device)
        if T > self.prefill_chunk:
            outs = [self.forward(tokens[i : i + self.prefill_chunk], positions[i : i + self.prefill_chunk], cache, last_only=last_only)
                    for i in range(0, T, self.prefill_chunk)]
            return outs[-1] if last_only else torch.cat(outs)
        start, end = cache.length, cache.length + T
        size = self._graph_size(T, end)
        if size is not None:
            logits = self._replay(tokens, positions, cache, T, size, last_only)
        else:
            cache.reserve(end)
            inp = self._inputs(tokens, positions, end, T)
            logits = self._compute(inp[:T], inp[T : 2 * T], inp[2 * T :], T, cache, last_only, end)
        cache.append([int(t) for t in tokens.tolist()])
        logits = logits.float()
        return logits.cpu() if self.logits_to_cpu else logits

    # -- graphs --

    def _graph_size(self, T: int, end: int) -> int | None:
        if not self.use_graphs or T > MAX_KERNEL_T:
            return None
        size = next(s for s in GRAPH_SIZES if s >= T)
        return size if end - T + size <= self.config.context_length else None

    def _inputs(self, tokens, positions, end, size):
        """One host->device copy: tokens, positions (padded to `size` with the last token) and the total length."""
        T = tokens.shape[0]
        tok = torch.as_tensor(tokens, dtype=torch.int64).cpu()
        pos = torch.as_tensor(positions, dtype=torch.int64).cpu()
        if size > T:
            tok = torch.cat([tok, tok[-1:].expand(size - T)])
            pos = torch.cat([pos, pos[-1] + torch.arange(1, size - T + 1)])
        host = torch.cat([tok, pos, torch.tensor([end - T + size])])
        return host.to(self.device, non_blocking=True)

    def _replay(self, tokens, positions, cache, T, size, last_only):
        cache.reserve(cache.length + size)  # may drop cache.graphs (new buffers)
        exact_last = last_only and size == T  # a padded block's last real row is not its last row
        key = (size, exact_last)
        inp = self._inputs(tokens, positions, cache.length + T, size)
        entry = cache.graphs.get(key)
        if entry is None:
            entry = cache.graphs[key] = self._capture(cache, size, exact_last, inp)
        else:
            entry.inp.copy_(inp)
        if entry.graph is None:  # emulation: the same static buffers, run eagerly
            entry.out = self._compute(*self._static_views(entry.inp, size), size, cache, exact_last, None)
        else:
            entry.graph.replay()
        if exact_last:
            return entry.out
        return entry.out[T - 1 : T] if last_only else entry.out[:T]

    @staticmethod
    def _static_views(inp, size):
        return inp[:size], inp[size : 2 * size], inp[2 * size :]

    def _capture(self, cache, size, last_only, inp) -> _Graph:
        static = inp.clone()
        self.graph_captures += 1
        if self.graph_mode == "emulate":
            return _Graph(None, static, None)
        views = self._static_views(static, size)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up: Triton compiles, cuBLAS picks its kernels (same K/V it will write)
            self._compute(*views, size, cache, last_only, None)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out = self._compute(*views, size, cache, last_only, None)
        return _Graph(graph, static, out)

    # -- the computation (capturable when T <= MAX_KERNEL_T and use_triton) --

    def _compute(self, tok, pos, seq_len, T: int, cache: CudaKVCache, last_only: bool, end: int | None) -> torch.Tensor:
        """T rows through the model with their K/V scattered into `cache` at `pos` -> logits (T or 1, vocab)."""
        kernels_on = self.use_triton

        def attend(i, q, k, v):
            if k is not None:  # else _layers' rope_qkv_ wrote them
                cache.k[i].index_copy_(1, pos, k.transpose(0, 1))
                cache.v[i].index_copy_(1, pos, v.transpose(0, 1))
            if kernels_on and T <= MAX_KERNEL_T:
                return verify_attention(q, cache.k[i], cache.v[i], seq_len)
            return self._sdpa(q, cache.k[i, :, :end], cache.v[i, :, :end], pos, end)

        h = self._layers(tok, pos, T, attend, cache)
        return self.head(h[-1:] if last_only else h, kernels_on and self.dense_kernel)

    def _layers(self, tok, pos, T: int, attend, cache: CudaKVCache | None = None) -> torch.Tensor:
        """The blocks and the output norm over T rows -> (T, hidden) in self.dtype; tok, pos on the device.

        attend(layer, q (T, heads, hd), k, v (T, kv_heads, hd)) stores K/V where the rows' caches keep them and
        returns attention's output (T, heads, hd). With `cache` and the kernels on (no q/k norm), one rope_qkv_
        launch rotates q and k and writes k and v into the cache at `pos`, and attend gets k = v = None."""
        cfg = self.config
        H, Hkv, D = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        qd, kd = H * D, Hkv * D
        kernels_on = self.use_triton
        norm = rms_norm if kernels_on else rms_norm_ref
        small = kernels_on and self.dense_kernel and T <= MAX_KERNEL_T  # batch-invariant (runtime.kernels.dense)
        res = self.embed(tok).float()  # (T, hidden) fp32 residual stream
        delta = None
        for i, blk in enumerate(self.blocks):
            if delta is None:
                h = norm(res, blk.attn_norm, cfg.rms_eps, out_dtype=self.dtype)
            else:
                h = norm(delta, blk.attn_norm, cfg.rms_eps, residual=res, out_dtype=self.dtype)
            qkv = blk.qkv(h, small)
            if kernels_on and cache is not None and blk.q_norm is None:
                q = rope_qkv_(qkv, pos, self.rope_cos, self.rope_sin, cache.k[i], cache.v[i], H, Hkv, cfg.rope_interleaved)
                k = v = None
            else:
                q = qkv[:, :qd].view(T, H, D)
                k = qkv[:, qd : qd + kd].view(T, Hkv, D)
                v = qkv[:, qd + kd :].view(T, Hkv, D)
                if blk.q_norm is not None:
                    q = norm(q.contiguous(), blk.q_norm, cfg.rms_eps)
                    k = norm(k.contiguous(), blk.k_norm, cfg.rms_eps)
                if kernels_on:
                    rope_(q, pos, self.rope_cos, self.rope_sin, cfg.rope_interleaved)
                    rope_(k, pos, self.rope_cos, self.rope_sin, cfg.rope_interleaved)
                else:
                    q.copy_(rope_ref(q, pos, self.rope_cos, self.rope_sin, cfg.rope_interleaved))
                    k.copy_(rope_ref(k, pos, self.rope_cos, self.rope_sin, cfg.rope_interleaved))
            delta = blk.attn_output(attend(i, q, k, v).reshape(T, qd), small)
            h = norm(delta, blk.ffn_norm, cfg.rms_eps, residual=res, out_dtype=self.dtype)
            gate_up = blk.gate_up(h, small)
            if kernels_on:
                act = silu_mul(gate_up)
            else:
                gate, up = gate_up.chunk(2, dim=1)
                act = F.silu(gate) * up
            delta = blk.ffn_down(act, small)
        return norm(delta, self.output_norm, cfg.rms_eps, residual=res, out_dtype=self.dtype)

    @torch.no_grad()
    def forward_branches(self, tokens: torch.Tensor, kv: BranchKV) -> torch.Tensor:
        """runtime.model.Qwen2Model.forward_branches on the device: tokens (B,) -> logits (B, vocab), one matmul
        per weight for all B branches; kv (its prefix a CudaKVCache) keeps each branch's own K/V on the device."""
        B, P, n = int(tokens.shape[0]), kv.start, kv.length
        assert B == kv.n and kv.prefix.length >= P, (B, kv.n, kv.prefix.length, P)
        assert kv.k.device == self.device, (kv.k.device, self.device)
        kv.reserve(n + 1)
        prefix = kv.prefix
        H, D = self.config.num_heads, self.config.head_dim

        def attend(i, q, k, v):
            kv.k[i, :, :, n] = k  # (B, kv_heads, head_dim)
            kv.v[i, :, :, n] = v
            out = branch_attention(q.float(), prefix.k[i, :, :P], prefix.v[i, :, :P], kv.k[i, :, :, : n + 1], kv.v[i, :, :, : n + 1])
            return out.view(B, H, D).to(q.dtype)

        pos = torch.full((B,), P + n, dtype=torch.int64, device=self.device)
        h = self._layers(tokens.to(self.device), pos, B, attend)
        kv.append([int(t) for t in tokens.tolist()])
        logits = self.head(h, self.use_triton and self.dense_kernel).float()
        return logits.cpu() if self.logits_to_cpu else logits

    @staticmethod
    def _sdpa(q, k, v, pos, end):
        """Torch attention over the cached prefix + block: q (T, H, D); k, v (Hkv, end, D) -> (T, H, D)."""
        T, H, D = q.shape
        Hkv = k.shape[0]
        if T == 1:  # fold each kv head's group into the query dim: no mask, no repeat
            out = F.scaled_dot_product_attention(q.view(1, Hkv, H // Hkv, D), k[None], v[None])
        else:
            mask = torch.arange(end, device=q.device)[None, :] <= pos[:, None]
            out = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k[None], v[None], attn_mask=mask, enable_gqa=True)
        return out.view(H, T, D).transpose(0, 1)


def build_cuda_model(config: ModelConfig, tensors: dict[str, torch.Tensor], *, device: torch.device | str = "cuda",
                     dtype: torch.dtype = torch.bfloat16, weights: str = "bf16", use_triton: bool = True,
                     graphs: bool | str = True) -> CudaModel:
    """Move a prepared tensors dict (this module's prepare_tensor, or runtime.weights' formats) to `device`."""
    assert weights in WEIGHT_MODES, weights
    device = torch.device(device)

    def vec(name):
        return tensors[name].to(device=device, dtype=torch.float32)

    def lin(names, biases=None):
        w = torch.cat([_dense(tensors, n).float() for n in names])
        b = None
        if biases is not None:
            b = torch.cat([tensors[n].float() for n in biases])
        q4 = all(n + ".q4" in tensors for n in names)  # runtime.weights stored them as exact Q4_K int4
        return DeviceLinear(w, b, mode=weights, device=device, dtype=dtype, int4_exact=q4)

    blocks = []
    for i in range(config.num_layers):
        p = f"blk.{i}."
        qkv = [f"{p}attn_{x}.weight" for x in "qkv"]
        blocks.append(DeviceBlock(
            attn_norm=vec(p + "attn_norm.weight"),
            qkv=lin(qkv, [f"{p}attn_{x}.bias" for x in "qkv"] if config.qkv_bias else None),
            attn_output=lin([p + "attn_output.weight"]),
            ffn_norm=vec(p + "ffn_norm.weight"),
            gate_up=lin([p + "ffn_gate.weight", p + "ffn_up.weight"]),
            ffn_down=lin([p + "ffn_down.weight"]),
            q_norm=vec(p + "attn_q_norm.weight") if config.qk_norm else None,
            k_norm=vec(p + "attn_k_norm.weight") if config.qk_norm else None,
        ))
    if "token_embd.weight" in tensors:
        table = tensors["token_embd.weight"].to(device=device, dtype=dtype)
    else:
        table = Embedding(tensors)(torch.arange(config.vocab_size)).to(device=device, dtype=dtype)
    embed = DeviceEmbedding(table)
    if config.tie_embeddings:
        head = DeviceLinear(table, None, mode="bf16", device=device, dtype=dtype)  # shares the table
    else:
        head = lin(["output.weight"])
    return CudaModel(config, embed, blocks, vec("output_norm.weight"), head, device=device, dtype=dtype,
                     use_triton=use_triton, graphs=graphs)

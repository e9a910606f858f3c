"""Model hyper-parameters, read from GGUF metadata (runtime.gguf_loader) or set by tests."""
from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_ARCHS = ("qwen2", "llama", "qwen3")


@dataclass(frozen=True)
class ModelConfig:
    arch: str  # one of SUPPORTED_ARCHS
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rope_theta: float = 1_000_000.0
    rms_eps: float = 1e-6
    context_length: int = 32768
    tie_embeddings: bool = True  # no output.weight: the head reuses token_embd.weight
    qkv_bias: bool = True  # qwen2: q/k/v projections have biases
    qk_norm: bool = False  # qwen3: RMSNorm on q and k per head
    rope_interleaved: bool = False  # llama GGUFs store q/k permuted for GPT-J style (interleaved) RoPE; qwen2/3 use NeoX style

    def __post_init__(self) -> None:
        assert self.arch in SUPPORTED_ARCHS, self.arch
        assert self.num_heads % self.num_kv_heads == 0
        assert self.head_dim % 2 == 0

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of K and V per token in 16-bit: 2 x layers x kv_heads x head_dim x 2."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * 2

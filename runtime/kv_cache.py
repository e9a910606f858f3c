"""Per-session KV cache: token ids + per-layer K/V buffers, with prefix reuse, fork and save/load.

Invariant: for every i < length, tokens[i]'s K and V are at position i in every layer.
The model writes a step's K/V into the slots past `length` first and calls `append` only
when all layers are written, so an interrupted forward leaves the cache as it was.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import struct
import tempfile
import zlib
from pathlib import Path

import torch

from runtime.config import ModelConfig

MAGIC = b"AGKVCACH"
FILE_VERSION = 1
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class KVCacheFileError(Exception):
    """A saved cache that cannot be used (corrupt, truncated, or for another model); rebuild it."""


def config_hash(config: ModelConfig) -> str:
    return hashlib.sha256(json.dumps(dataclasses.asdict(config), sort_keys=True).encode()).hexdigest()[:16]


class KVCache:
    """K/V buffers are (layers, kv_heads, capacity, head_dim); capacity doubles as tokens arrive."""

    def __init__(self, config: ModelConfig, *, model_id: str = "", dtype: torch.dtype = torch.float32, capacity: int = 256):
        assert dtype in _DTYPES.values(), dtype
        self.config, self.model_id, self.dtype = config, model_id, dtype
        self.tokens: list[int] = []
        capacity = max(1, min(capacity, config.context_length))
        shape = (config.num_layers, config.num_kv_heads, capacity, config.head_dim)
        self.k = torch.zeros(shape, dtype=dtype)
        self.v = torch.zeros(shape, dtype=dtype)

    @property
    def length(self) -> int:
        return len(self.tokens)

    @property
    def capacity(self) -> int:
        return self.k.shape[2]

    @property
    def nbytes(self) -> int:
        """Bytes held by the K/V buffers (allocated capacity, not only `length`)."""
        return self.k.nbytes + self.v.nbytes

    def reserve(self, n: int) -> None:
        """Make room for positions < n (growth copies only the valid prefix)."""
        if n <= self.capacity:
            return
        if n > self.config.context_length:
            raise ValueError(f"{n} tokens exceed the model's context of {self.config.context_length}")
        capacity = min(max(n, 2 * self.capacity), self.config.context_length)
        # Normal tensors even when a caller runs the model under inference_mode, so the buffers
        # stay writable outside it (speculative decoding, fork, load).
        with torch.inference_mode(False):
            for attr in ("k", "v"):
                old = getattr(self, attr)
                new = torch.zeros(old.shape[:2] + (capacity, old.shape[3]), dtype=self.dtype, device=old.device)
                new[:, :, : self.length] = old[:, :, : self.length]
                setattr(self, attr, new)

    def append(self, tokens: list[int]) -> None:
        """Record tokens whose K/V the caller has already written at positions length.. (all layers)."""
        assert self.length + len(tokens) <= self.capacity
        self.tokens.extend(tokens)

    def common_prefix_len(self, tokens: list[int]) -> int:
        n = 0
        for a, b in zip(self.tokens, tokens):
            if a != b:
                break
            n += 1
        return n

    def truncate(self, n: int) -> None:
        """Keep the first n tokens (the K/V past them become free slots)."""
        assert 0 <= n <= self.length, (n, self.length)
        del self.tokens[n:]

    def fork(self, n: int | None = None) -> "KVCache":
        """An independent copy of the first n tokens (all of them by default), e.g. for a subagent."""
        n = self.length if n is None else n
        assert 0 <= n <= self.length
        child = KVCache(self.config, model_id=self.model_id, dtype=self.dtype, capacity=max(n, 256))
        child.k[:, :, :n] = self.k[:, :, :n]
        child.v[:, :, :n] = self.v[:, :, :n]
        child.tokens = self.tokens[:n]
        return child

    def append_kv(self, tokens: list[int], k: torch.Tensor, v: torch.Tensor) -> None:
        """Append tokens with their K/V computed elsewhere (k, v: (layers, kv_heads, len(tokens), head_dim)), e.g. a
        branch's own positions from a BranchKV."""
        n, end = self.length, self.length + len(tokens)
        assert k.shape == v.shape == self.k.shape[:2] + (len(tokens), self.k.shape[3]), (k.shape, self.k.shape)
        self.reserve(end)
        self.k[:, :, n:end] = k
        self.v[:, :, n:end] = v
        self.append(tokens)

    def save(self, path: str | Path) -> None:
        """Write header + K/V of the valid prefix atomically (temp file + os.replace)."""
        path = Path(path)
        n = self.length
        payload = b"".join(_tensor_bytes(t[:, :, :n]) for t in (self.k, self.v))
        header = json.dumps({
            "model_id": self.model_id, "config": config_hash(self.config), "dtype": str(self.dtype).removeprefix("torch."),
            "length": n, "tokens": self.tokens, "payload_bytes": len(payload), "crc32": zlib.crc32(payload),
        }).encode()
        atomic_write(path, MAGIC + struct.pack("<IQ", FILE_VERSION, len(header)) + header, payload)

    @classmethod
    def load(cls, path: str | Path, config: ModelConfig, *, model_id: str = "") -> "KVCache":
        """Read a saved cache; raises KVCacheFileError if it is unreadable or for another model/config."""
        path = Path(path)
        try:
            with open(path, "rb") as f:  # read once into a writable buffer: the K/V below are views of it, not copies
                data = bytearray(os.fstat(f.fileno()).st_size)
                got = f.readinto(data)
            if got != len(data):  # the file changed under us
                raise KVCacheFileError(f"{path}: corrupt or truncated data")
        except OSError as e:
            raise KVCacheFileError(f"{path}: cannot read ({e.strerror})") from None
        fixed = len(MAGIC) + struct.calcsize("<IQ")
        if len(data) < fixed or data[: len(MAGIC)] != MAGIC:
            raise KVCacheFileError(f"{path}: not a KV cache file")
        version, header_len = struct.unpack_from("<IQ", data, len(MAGIC))
        if version != FILE_VERSION:
            raise KVCacheFileError(f"{path}: file version {version}, expected {FILE_VERSION}")
        try:
            header = json.loads(bytes(data[fixed : fixed + header_len]))
            n, tokens, dtype = int(header["length"]), [int(t) for t in header["tokens"]], _DTYPES[header["dtype"]]
        except (ValueError, KeyError, TypeError):
            raise KVCacheFileError(f"{path}: corrupt header") from None
        if header.get("model_id") != model_id or header.get("config") != config_hash(config):
            raise KVCacheFileError(f"{path}: saved for another model (model_id {header.get('model_id')!r})")
        payload = memoryview(data)[fixed + header_len :]
        if len(tokens) != n or len(payload) != header.get("payload_bytes") or zlib.crc32(payload) != header.get("crc32"):
            raise KVCacheFileError(f"{path}: corrupt or truncated data")
        cache = cls(config, model_id=model_id, dtype=dtype, capacity=max(n, 256))
        shape = (config.num_layers, config.num_kv_heads, n, config.head_dim)
        half = len(payload) // 2
        if half != torch.Size(shape).numel() * cache.k.element_size() or len(payload) != 2 * half:
            raise KVCacheFileError(f"{path}: K/V size does not match the model's shape")
        for attr, chunk in (("k", payload[:half]), ("v", payload[half:])) if n else ():
            getattr(cache, attr)[:, :, :n] = torch.frombuffer(chunk, dtype=dtype).reshape(shape)
        cache.tokens = tokens
        return cache


class BranchKV:
    """K/V of B sequences that continue one shared prefix, e.g. sampled branches of one prompt.

    The prefix stays in its KVCache (read, never copied: its first `start` positions must not change while the
    branches decode); each branch's own positions are in k, v (layers, B, kv_heads, capacity, head_dim). The branches
    advance together, one token each per step, so all of them hold `length` positions past the prefix."""

    def __init__(self, prefix: KVCache, n: int, capacity: int = 64):
        assert n >= 1
        self.prefix, self.start = prefix, prefix.length
        c = prefix.config
        self.tokens: list[list[int]] = [[] for _ in range(n)]  # per branch, the tokens whose K/V are here
        capacity = max(1, min(capacity, c.context_length - self.start))
        shape = (c.num_layers, n, c.num_kv_heads, capacity, c.head_dim)
        self.k = torch.zeros(shape, dtype=prefix.dtype, device=prefix.k.device)  # where the prefix is (CPU or GPU)
        self.v = torch.zeros(shape, dtype=prefix.dtype, device=prefix.k.device)

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def length(self) -> int:
        return len(self.tokens[0])

    def reserve(self, n: int) -> None:
        """Room for n positions past the prefix (growth doubles and copies only the valid positions)."""
        if n <= self.k.shape[3]:
            return
        limit = self.prefix.config.context_length - self.start
        if n > limit:
            raise ValueError(f"{self.start + n} tokens exceed the model's context of {self.prefix.config.context_length}")
        capacity = min(max(n, 2 * self.k.shape[3]), limit)
        with torch.inference_mode(False):
            for attr in ("k", "v"):
                old = getattr(self, attr)
                new = torch.zeros(old.shape[:3] + (capacity, old.shape[4]), dtype=old.dtype, device=old.device)
                new[:, :, :, : self.length] = old[:, :, :, : self.length]
                setattr(self, attr, new)

    def append(self, tokens: list[int]) -> None:
        """One token per branch whose K/V the caller has written at position `length` (all layers)."""
        assert len(tokens) == self.n and self.length < self.k.shape[3]
        for seq, t in zip(self.tokens, tokens):
            seq.append(t)

    def branch(self, b: int) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """Branch b's tokens and a copy of their K/V (layers, kv_heads, length, head_dim), for KVCache.append_kv."""
        n = self.length
        return list(self.tokens[b]), self.k[:, b, :, :n].clone(), self.v[:, b, :, :n].clone()

    def select(self, rows: list[int]) -> None:
        """Keep only these branches, in this order (finished branches drop out of the batch); a row named twice is
        copied (branches that shared it part)."""
        assert rows and all(0 <= r < self.n for r in rows), rows
        index = torch.tensor(rows, device=self.k.device)
        self.k, self.v = self.k.index_select(1, index), self.v.index_select(1, index)
        self.tokens = [list(self.tokens[r]) for r in rows]


def atomic_write(path: Path, *chunks: bytes) -> None:
    """Write `chunks` to `path` through a synced temp file and a rename: readers see the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _tensor_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes()

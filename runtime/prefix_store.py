"""Prefix KV store: the KV of session prompts kept on disk so a new process starts warm.

A session's first prompt (system prompt + tools + memory files + the first user message) is the same
from one process to the next in a given repository, except for its tail. After a session's first
prefill the engine stores that prompt's KV here; when a later session (in this or another process)
starts with an empty cache, the engine loads the entry sharing the longest token prefix with its
prompt and keeps only that common prefix, so only the rest (the user's new text) is prefilled.

Layout, under <cache dir>/prefix-kv/:
    <model key>/<entry>.tokens   {"version", "model_id", "tokens"}: the small index a lookup reads
    <model key>/<entry>.kv       runtime.kv_cache.KVCache.save file holding exactly those tokens
The model key hashes the model id, its config and a fingerprint of its weights (two GGUFs with one
file name do not share entries); the entry name hashes the tokens. The .kv files carry the model id
plus that fingerprint, and KVCache.load checks it, the config, sizes and a CRC, so a corrupt,
truncated or foreign file is never used: the entry is deleted and the prompt is prefilled (and
stored again).

Concurrency: both files are written to a temp file and renamed (.kv first, then .tokens), so readers
see a whole entry or none; processes writing the same entry write the same bytes. An entry deleted
by another process's eviction between lookup and load is a miss. The .tokens file's mtime is the
entry's last use; eviction removes least recently used entries until all models' entries fit the
byte budget (RuntimeOptions.prefix_cache_bytes, default 1 GiB; 0 turns the store off).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from runtime import cpu_kernels
from runtime.config import ModelConfig
from runtime.kv_cache import KVCache, atomic_write, config_hash
from runtime.options import DEFAULT_PREFIX_CACHE_BYTES

log = logging.getLogger(__name__)

INDEX_VERSION = 1
MIN_REUSE_TOKENS = 16  # a shorter common prefix is not worth reading a file for
STORE_MIN_NEW_TOKENS = 256  # store a prompt only when the best entry leaves at least this many tokens uncovered
ORPHAN_GRACE_S = 600.0  # a .kv without its .tokens (or a temp file) younger than this may be a write in progress


def weights_fingerprint(model) -> str:
    """A cheap hash of some weights (norms and a few embedding rows): tells apart models with one name."""
    h = hashlib.sha256()
    parts = [model.output_norm] + [b.attn_norm for b in model.blocks[:2]]
    vocab = model.config.vocab_size
    parts.append(model.embed(torch.tensor(sorted({0, vocab // 3, vocab // 2, vocab - 1}))))
    for t in parts:
        h.update(t.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())  # the weights may be on a GPU
    return h.hexdigest()[:16]


def store_fingerprint(model) -> str:
    """What a stored entry must match besides the model id: the weights, and the code that computed the K/V."""
    return f"{weights_fingerprint(model)} {cpu_kernels.numerics_id()}"


def common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass
class Match:
    name: str  # entry name (file stem)
    common: int  # tokens shared with the looked-up prompt
    length: int  # tokens in the entry


class PrefixStore:
    """One model's entries in `root/<model key>/`; the budget covers every model's entries under `root`."""

    def __init__(self, root: Path, model_id: str, config: ModelConfig, *, fingerprint: str = "",
                 budget_bytes: int = DEFAULT_PREFIX_CACHE_BYTES, load_cache: Callable[..., KVCache] | None = None):
        """load_cache(path, model_id=...): the model's own loader (runtime.api.Model.load_cache), so an entry
        comes back where the model keeps its caches (host or GPU); default KVCache.load."""
        self.root, self.model_id, self.config, self.budget = Path(root), model_id, config, budget_bytes
        self._load_cache = load_cache or (lambda path, model_id: KVCache.load(path, config, model_id=model_id))
        self.kv_id = f"{model_id}|weights {fingerprint}"  # the model id written into (and checked in) .kv files
        key = hashlib.sha256(f"{self.kv_id}|{config_hash(config)}".encode()).hexdigest()[:16]
        self.dir = self.root / key
        kv = config.num_layers * config.num_kv_heads * config.head_dim
        self.bytes_per_token = 2 * kv * 4  # fp32 K and V, as KVCache stores them by default

    @property
    def enabled(self) -> bool:
        return self.budget > 0

    # --- lookup ----------------------------------------------------------------------------------

    def lookup(self, tokens: list[int]) -> Match | None:
        """The entry sharing the longest token prefix with `tokens` (reads only the small indexes)."""
        if not self.enabled:
            return None
        best: Match | None = None
        for index in self._indexes():
            entry = self._read_index(index)
            if entry is None:
                continue
            n = common_prefix(entry, tokens)
            if best is None or n > best.common or (n == best.common and len(entry) < best.length):
                best = Match(index.stem, n, len(entry))
        return best

    def load(self, match: Match, keep: int | None = None) -> KVCache | None:
        """The entry's cache cut to `keep` tokens (default: its common prefix); None when it is unusable."""
        kv_path, index = self.dir / f"{match.name}.kv", self.dir / f"{match.name}.tokens"
        try:
            cache = self._load_cache(kv_path, model_id=self.kv_id)
        except Exception as e:  # corrupt, truncated, another model, or evicted meanwhile: rebuild
            log.info("prefix store: ignoring %s: %s", kv_path.name, e)
            if kv_path.exists() or index.exists():
                self._remove(match.name)
            return None
        expected = self._read_index(index)
        if expected is not None and expected != cache.tokens:
            log.info("prefix store: %s holds other tokens than its index; removed", kv_path.name)
            self._remove(match.name)
            return None
        cache.model_id = self.model_id  # the engine's id again (session saves use it)
        cache.truncate(min(match.common if keep is None else keep, cache.length))
        try:
            os.utime(index)  # last use, for LRU eviction
        except OSError:
            pass
        return cache

    # --- store -----------------------------------------------------------------------------------

    def should_store(self, prompt_tokens: int, covered: int) -> bool:
        """Worth a write: enabled, fits the budget, and no entry already covers nearly all of the prompt."""
        return (self.enabled and prompt_tokens - covered >= STORE_MIN_NEW_TOKENS
                and prompt_tokens * self.bytes_per_token <= self.budget)

    def store(self, cache: KVCache) -> Path | None:
        """Write `cache` (all its tokens) as an entry, then evict to the budget; returns the .kv path."""
        if not self.enabled or cache.length == 0:
            return None
        tokens = list(cache.tokens)
        name = hashlib.sha256(f"{len(tokens)}:{tokens}".encode()).hexdigest()[:32]
        kv_path, index = self.dir / f"{name}.kv", self.dir / f"{name}.tokens"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            if self._read_index(index) != tokens or not kv_path.exists():
                own_id, cache.model_id = cache.model_id, self.kv_id
                try:
                    cache.save(kv_path)  # atomic; the index follows, so a reader never sees an index without its KV
                finally:
                    cache.model_id = own_id
                atomic_write(index, json.dumps({"version": INDEX_VERSION, "model_id": self.model_id,
                                                 "tokens": tokens}, separators=(",", ":")).encode())
            else:
                os.utime(index)
        except OSError as e:  # disk full, read-only cache dir: a cold start next time, nothing worse
            log.warning("prefix store: cannot write %s: %s", kv_path, e)
            return None
        self.evict()
        return kv_path

    # --- eviction --------------------------------------------------------------------------------

    def entries(self) -> list[tuple[Path, float, int]]:
        """Every model's entries under root: (index path, last use, bytes of both files)."""
        out = []
        for index in self.root.glob("*/*.tokens"):
            kv_path = index.with_suffix(".kv")
            try:
                st = index.stat()
                size = st.st_size + (kv_path.stat().st_size if kv_path.exists() else 0)
            except OSError:
                continue
            out.append((index, st.st_mtime, size))
        return out

    def total_bytes(self) -> int:
        return sum(size for _, _, size in self.entries())

    def evict(self) -> None:
        """Remove least recently used entries until all of them fit the budget; clear stale orphans."""
        now = time.time()
        for path in list(self.root.glob("*/*.kv")) + list(self.root.glob("*/*.tmp")):
            try:
                orphan = path.suffix == ".tmp" or not path.with_suffix(".tokens").exists()
                if orphan and now - path.stat().st_mtime > ORPHAN_GRACE_S:
                    path.unlink()
            except OSError:
                pass
        entries = sorted(self.entries(), key=lambda e: e[1])
        total = sum(size for _, _, size in entries)
        for index, _, size in entries:
            if total <= self.budget:
                break
            _remove_entry(index)
            total -= size

    # --- internals -------------------------------------------------------------------------------

    def _indexes(self) -> list[Path]:
        try:
            return [p for p in self.dir.iterdir() if p.suffix == ".tokens"]
        except OSError:
            return []

    def _read_index(self, index: Path) -> list[int] | None:
        try:
            data = json.loads(index.read_bytes())
            if data.get("version") != INDEX_VERSION or data.get("model_id") != self.model_id:
                raise ValueError("another version or model")
            tokens = data["tokens"]
            if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
                raise ValueError("tokens are not a list of ids")
            return tokens
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            log.info("prefix store: ignoring index %s: %s", index.name, e)
            _remove_entry(index)  # written by rename, so never seen half-written: it is broken; rebuild
            return None

    def _remove(self, name: str) -> None:
        _remove_entry(self.dir / f"{name}.tokens")


def _remove_entry(index: Path) -> None:
    """Index first (the entry disappears for lookups), then its KV file."""
    for path in (index, index.with_suffix(".kv")):
        try:
            path.unlink()
        except OSError:
            pass

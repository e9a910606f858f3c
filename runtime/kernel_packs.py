"""Kernel packs: the CPU kernel's weight layouts, built once per converted model and mapped by later processes.

The kernel reads weights regrouped 16 rows at a time (runtime.weights: pack_q8i, pack_q4i, and the stored
q5i blocks). Built at a linear's first matmul, that regrouping costs every process seconds before its first
token (the 1.5B: ~3-4 s on 2 cores) and keeps a private copy of the weights in memory. Here the segments of
every linear are written once, beside the converted weights, and mapped copy-on-write afterwards: no work at
start, and the pages are shared with the page cache (and with other processes on the same model).

Layout, in <converted>/<format>/kernel-pack-v<PACK_VERSION>/:
    packs.bin    the segments' tensors (runtime.tensor_file)
    index.json   {"version", "format_id", "source": tensors.bin's size and mtime, "total_bytes", "tensors",
                  "linears": {name: {"out", "in", "segments": [[fmt, first row, rows], ...]}}}
Both are written through temp files and renamed, packs.bin first, so a reader sees a whole pack or none;
processes building the same pack write the same bytes. A pack whose index does not match the model (another
conversion, layout, shapes) is rebuilt; one that cannot be written leaves the segments in memory.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Callable

import torch

from runtime import cpu_kernels
from runtime.api import Progress
from runtime.kv_cache import atomic_write
from runtime.tensor_file import TensorWriter, map_tensors
from runtime.weights import FORMAT_ID, Linear

log = logging.getLogger(__name__)

PACK_VERSION = 1  # bump whenever pack_q8i, pack_q4i, pack_q5i or a kernel_segments method changes what it returns
TMP_GRACE_S = 600.0  # a temp file younger than this may be another process's write in progress
GROUP_ROWS = 16
SEGMENT_BYTES = {cpu_kernels.FMT_Q8I: 512, cpu_kernels.FMT_Q5I: 352, cpu_kernels.FMT_Q4I: 384}  # per group and block


def model_linears(model) -> list[tuple[str, Linear]]:
    """Every linear of a CPU model (runtime.model.Qwen2Model), each with a name stable across loads."""
    out = []
    for i, b in enumerate(model.blocks):
        out += [(f"blk.{i}.qkv.{j}", lin) for j, lin in enumerate(b.qkv)]
        out.append((f"blk.{i}.attn_output", b.attn_output))
        out += [(f"blk.{i}.gate_up.{j}", lin) for j, lin in enumerate(b.gate_up)]
        out.append((f"blk.{i}.ffn_down", b.ffn_down))
    out.append(("head", model.head))
    return out


def pack_dir(format_dir: Path) -> Path:
    return Path(format_dir) / f"kernel-pack-v{PACK_VERSION}"


def attach(model, format_dir: Path, progress: Callable[[Progress], None] | None = None) -> str:
    """Give each linear of `model` (loaded from `format_dir`) its kernel segments: mapped from the pack there, or
    built now and written there first. Returns "mapped", "built", "memory" (built; the write failed) or "off"
    (no kernel on this machine: the linears keep torch's path)."""
    k = cpu_kernels.kernel()
    if k is None or k.isa == 0:
        return "off"
    linears = model_linears(model)
    directory = pack_dir(format_dir)
    source = _source_id(Path(format_dir) / "tensors.bin")
    segments = _read_pack(directory, linears, source)
    if segments is not None:
        _give(linears, segments)
        return "mapped"
    t0 = time.perf_counter()
    if progress:
        progress(Progress("packing weights for the CPU kernel", 0, 1))  # once per model: seconds
    built = {name: lin.kernel_segments() for name, lin in linears}
    try:
        _write_pack(directory, linears, built, source)
        segments = _read_pack(directory, linears, source)
    except OSError as e:  # disk full, read-only cache: this process keeps its copies; the next one tries again
        log.warning("kernel pack: cannot write %s: %s", directory, e)
        segments = None
    _give(linears, segments if segments is not None else built)
    log.info("kernel pack: built %d linears in %.1f s", len(linears), time.perf_counter() - t0)
    return "built" if segments is not None else "memory"


def _give(linears: list[tuple[str, Linear]], segments: dict[str, list[tuple]]) -> None:
    for name, lin in linears:
        lin.use_kernel_segments(segments[name])


def _source_id(tensors_bin: Path) -> list[int]:
    """What ties a pack to one conversion: a rebuilt tensors.bin (same path) gets another mtime."""
    try:
        st = tensors_bin.stat()
        return [st.st_size, st.st_mtime_ns]
    except OSError:
        return [0, 0]


def _expected_shape(fmt: int, rows: int, in_features: int) -> list[int]:
    return [-(-rows // GROUP_ROWS), in_features // 32, SEGMENT_BYTES[fmt]]


def _read_pack(directory: Path, linears: list[tuple[str, Linear]], source: list[int]) -> dict[str, list[tuple]] | None:
    """The pack's segments per linear name, mapped; None when there is none or it does not fit this model."""
    index_path = directory / "index.json"
    if not index_path.exists():
        return None
    try:
        meta = json.loads(index_path.read_text())
        if (meta.get("version"), meta.get("format_id"), meta.get("source")) != (PACK_VERSION, FORMAT_ID, source):
            raise ValueError("written for another conversion or layout")
        tensors = map_tensors(directory / "packs.bin", meta["tensors"], meta["total_bytes"])
        if set(meta["linears"]) != {name for name, _ in linears}:
            raise ValueError("its linears are not this model's")
        out = {}
        for name, lin in linears:
            entry = meta["linears"][name]
            if (entry["out"], entry["in"]) != (lin.out_features, lin.in_features):
                raise ValueError(f"{name} has another shape")
            segs, row = [], 0
            for i, (fmt, first, rows) in enumerate(entry["segments"]):
                data, scales = tensors[f"{name}.{i}"], tensors.get(f"{name}.{i}.scales")
                shape = _expected_shape(fmt, rows, lin.in_features) if fmt in SEGMENT_BYTES else None
                if (first != row or shape is None or list(data.shape) != shape
                        or (scales is None) != (fmt != cpu_kernels.FMT_Q8I) or data.dtype != torch.uint8
                        or (scales is not None and (scales.dtype != torch.float32 or list(scales.shape) != [rows]))):
                    raise ValueError(f"{name} segment {i} does not fit the linear")
                segs.append((fmt, data, scales, first, rows))
                row = first + rows
            if row != lin.out_features:
                raise ValueError(f"{name}: its segments cover {row} of {lin.out_features} rows")
            out[name] = segs
        return out
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError) as e:
        log.warning("kernel pack %s is unusable (%s); rebuilding it", directory, e)
        return None


def _write_pack(directory: Path, linears: list[tuple[str, Linear]], built: dict[str, list[tuple]],
                source: list[int]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    _clear_stale_temps(directory)
    chunks: list = []  # views of the segments' memory, written by one atomic_write
    writer = TensorWriter(_Chunks(chunks))
    entries = {}
    for name, lin in linears:
        segs = []
        for i, (fmt, data, scales, first, rows) in enumerate(built[name]):
            writer.add(f"{name}.{i}", data)
            if scales is not None:
                writer.add(f"{name}.{i}.scales", scales)
            segs.append([fmt, first, rows])
        entries[name] = {"out": lin.out_features, "in": lin.in_features, "segments": segs}
    atomic_write(directory / "packs.bin", *chunks)
    meta = {"version": PACK_VERSION, "format_id": FORMAT_ID, "source": source, "total_bytes": writer.offset,
            "tensors": writer.index, "linears": entries}
    atomic_write(directory / "index.json", json.dumps(meta).encode())


class _Chunks:
    """A file-like sink for TensorWriter that keeps what it is given (no copies) for atomic_write."""

    def __init__(self, chunks: list):
        self.write = chunks.append


def _clear_stale_temps(directory: Path) -> None:
    now = time.time()
    for path in directory.glob("*.tmp"):
        try:
            if now - path.stat().st_mtime > TMP_GRACE_S:
                path.unlink()
        except OSError:
            pass

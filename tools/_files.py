"""Shared file helpers: read-state stamps, atomic writes, binary sniffing, line endings, diffs."""
from __future__ import annotations

import codecs
import difflib
import importlib.util
import os
import secrets
from pathlib import Path

from tools.base import FileStamp, ToolContext

# Magic numbers of the binary formats worth naming; anything else is "binary data".
_MAGIC = [
    (b"\x89PNG\r\n\x1a\n", "PNG image"), (b"\xff\xd8\xff", "JPEG image"), (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"), (b"BM", "BMP image"), (b"%PDF", "PDF document"), (b"PK\x03\x04", "ZIP archive"),
    (b"\x1f\x8b", "gzip archive"), (b"\x7fELF", "ELF executable"), (b"GGUF", "GGUF model file"),
    (b"\xca\xfe\xba\xbe", "Mach-O/Java class file"), (b"SQLite format 3\x00", "SQLite database"),
]
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".ico", ".tif", ".tiff"}


def display_path(ctx: ToolContext, path: Path) -> str:
    """Relative to the project root when inside it (shorter for the model), else absolute."""
    try:
        return str(path.relative_to(ctx.cwd.resolve())) or "."
    except ValueError:
        return str(path)


def stamp_of(path: Path) -> FileStamp:
    st = path.stat()
    return FileStamp(mtime_ns=st.st_mtime_ns, size=st.st_size)


def remember(ctx: ToolContext, path: Path) -> None:
    """Record that the agent now knows the file as it is on disk."""
    ctx.read_files[str(path)] = stamp_of(path)


def freshness_error(ctx: ToolContext, path: Path) -> str | None:
    """Why the agent may not change an existing file yet (never read, or changed since), or None."""
    known = ctx.read_files.get(str(path))
    shown = display_path(ctx, path)
    if known is None:
        return f"You must Read {shown} before changing it."
    if known != stamp_of(path):
        return f"{shown} changed on disk since you read it; Read it again."
    return None


def missing_error(ctx: ToolContext, path: Path, what: str = "File") -> str:
    """'does not exist' plus the closest names in the same directory, so the model can correct a typo."""
    message = f"{what} does not exist: {display_path(ctx, path)}."
    parent = path.parent
    if not parent.is_dir():
        return message + f" Its directory {display_path(ctx, parent)} does not exist either."
    names = [p.name for p in parent.iterdir()]
    close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.5)
    if close:
        message += " Did you mean: " + ", ".join(display_path(ctx, parent / n) for n in close) + "?"
    return message


def read_only_error(ctx: ToolContext, path: Path) -> str | None:
    """Why an existing file must not be changed because of its permissions, or None.

    Checked before writing: the atomic rename needs only the directory's permission, and root may write
    anything, so neither would stop a write to a 0444 file on its own."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if st.st_mode & 0o222 == 0 or not os.access(path, os.W_OK):
        return (f"{display_path(ctx, path)} is read-only (mode {st.st_mode & 0o7777:04o}), so it was not changed. "
                "If it must change, ask the user to make it writable.")
    return None


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path`, keeping an existing file's inode facts: mode, owner and group, and hard links.

    A new file or a singly-linked one goes through a temp file in the same directory and os.replace, so
    a crash leaves the old or the new content. A file with other hard links is rewritten in place (a
    rename would split it from them), and so is one in a directory we may not create files in."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None  # new file: 0o666 minus the umask, applied by os.open below
    if st is not None and (st.st_mode & 0o222 == 0 or not os.access(path, os.W_OK)):
        raise PermissionError(13, "the file is read-only", str(path))  # read_only_error() says it to the model
    forget_bytecode(path)
    if st is not None and st.st_nlink > 1:
        _write_in_place(path, data)
        return
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except PermissionError:
        if st is None:
            raise
        _write_in_place(path, data)
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if st is not None:
            made = os.stat(tmp)
            if (st.st_uid, st.st_gid) != (made.st_uid, made.st_gid):
                try:  # root editing a user's file, or a group-owned file; otherwise not permitted, and that is fine
                    os.chown(tmp, st.st_uid, st.st_gid)
                except PermissionError:
                    pass
            os.chmod(tmp, st.st_mode & 0o7777)  # after chown, which clears setuid/setgid bits
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def forget_bytecode(path: Path) -> None:
    """Remove a Python file's cached .pyc: Python trusts one whose source has the same size and mtime second, so a
    rewrite of equal length within a second of the last import would run the old code."""
    if path.suffix == ".py":
        try:
            Path(importlib.util.cache_from_source(str(path))).unlink(missing_ok=True)
        except (OSError, ValueError, NotImplementedError):
            pass


def _write_in_place(path: Path, data: bytes) -> None:
    """Truncate and rewrite the existing inode (mode, owner and every hard link stay as they are)."""
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate()
        f.flush()
        os.fsync(f.fileno())


def sniff(head: bytes) -> str | None:
    """A name for a binary format, 'binary data' for unnamed binary, None for UTF-8 text."""
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "WEBP image"
    if b"\x00" in head:
        return "binary data"
    try:  # incremental: a multi-byte character cut at the end of `head` is not an error
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "non-UTF-8 data (binary, or text in another encoding)"
    return None


def image_size(head: bytes) -> tuple[int, int] | None:
    """(width, height) for PNG and GIF headers; other formats are described without it."""
    if head.startswith(b"\x89PNG") and len(head) >= 24:
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    return None


def read_text(path: Path) -> str | None:
    """The file decoded as UTF-8, or None when it is binary."""
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def is_crlf(text: str) -> bool:
    """True when every line break is CRLF: such files are edited as LF and written back as CRLF."""
    return "\r\n" in text and text.count("\r\n") == text.count("\n")


def unified_diff(old: str, new: str, label: str) -> str:
    """A git-style unified diff ('\\ No newline at end of file' included) for UIs and hooks."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{label}", tofile=f"b/{label}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def numbered(lines: list[str], first: int) -> str:
    """Lines in Read's `cat -n` format, the first one numbered `first`."""
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start=first))

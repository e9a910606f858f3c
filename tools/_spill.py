"""Where a foreground command's output goes: memory while short, a capped file when long.

The model sees at most `show_bytes` (head and tail, whole lines). Past that the output is saved in a
file for Read and Grep, but never more than `file_head_bytes` from the start and `file_tail_bytes` from
the end with a note between (`yes` writes gigabytes in seconds). The file lives in the session's output
directory, which the session removes at its end.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

SHOW_BYTES = 30_000
FILE_HEAD_BYTES = 8 << 20
FILE_TAIL_BYTES = 2 << 20


class OutputSpill:
    def __init__(self, directory: str | Path | None, show_bytes: int = SHOW_BYTES,
                 file_head_bytes: int = FILE_HEAD_BYTES, file_tail_bytes: int = FILE_TAIL_BYTES) -> None:
        assert show_bytes <= file_head_bytes and show_bytes // 2 <= file_tail_bytes
        self.show_bytes, self.file_head_bytes, self.file_tail_bytes = show_bytes, file_head_bytes, file_tail_bytes
        self.directory = directory
        self.total = 0
        self.first = bytearray()  # the first show_bytes, for the result itself
        self.last = bytearray()  # the last show_bytes // 2
        self.tail = bytearray()  # what comes after the file's head, trimmed to about file_tail_bytes
        self.dropped = 0  # bytes between the file's head and tail that were not kept
        self.path: str | None = None
        self._file = None
        self._in_file = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if len(self.first) < self.show_bytes:
            self.first += chunk[: self.show_bytes - len(self.first)]
        half = self.show_bytes // 2
        self.last = (self.last + chunk)[-half:] if len(chunk) < half else bytearray(chunk[-half:])
        if self.total <= self.show_bytes:
            return  # short so far: memory only
        if self._file is None:
            fd, self.path = tempfile.mkstemp(prefix="agent-bash-", suffix=".log", dir=self.directory)
            self._file = os.fdopen(fd, "wb")
            before = self.total - len(chunk)  # all of it still in `first`: total just passed show_bytes
            chunk = bytes(self.first[:before]) + chunk
        room = self.file_head_bytes - self._in_file
        if room > 0:
            self._file.write(chunk[:room])
            self._in_file += min(room, len(chunk))
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.file_tail_bytes:  # trim in steps, not on every chunk
                cut = len(self.tail) - self.file_tail_bytes
                del self.tail[:cut]
                self.dropped += cut

    def finish(self) -> tuple[str, str | None]:
        """(the text the model sees, the saved file or None); closes the file."""
        if self._file is None:
            text = self.first.decode("utf-8", errors="replace")
            if not text:
                return "(no output)\n", None
            return (text if text.endswith("\n") else text + "\n"), None
        if len(self.tail) > self.file_tail_bytes:
            cut = len(self.tail) - self.file_tail_bytes
            del self.tail[:cut]
            self.dropped += cut
        if self.dropped:
            self._file.write(f"\n[... {self.dropped} bytes of output not kept: the file keeps the first "
                             f"{self._in_file} and the last {len(self.tail)} bytes ...]\n".encode())
        self._file.write(self.tail)
        self._file.close()
        half = self.show_bytes // 2
        head = self.first[:half].decode("utf-8", errors="ignore")
        tail = self.last.decode("utf-8", errors="ignore")
        head = head[: head.rfind("\n") + 1] or head  # whole lines where possible
        tail = tail[tail.find("\n") + 1:] or tail
        omitted = self.total - len(head.encode()) - len(tail.encode())
        kept = ("the full output is" if not self.dropped else
                f"its first {_size(self._in_file)} and last {_size(len(self.tail))} are")
        note = f"[Output was {self.total} bytes; {kept} saved in {self.path}: Read it with offset/limit or Grep it.]\n"
        if not tail.endswith("\n"):
            tail += "\n"
        return f"{head}[... {omitted} bytes omitted ...]\n{tail}{note}", self.path

    def discard(self) -> None:
        """Close and remove the file (a command that could not start)."""
        if self._file is not None:
            self._file.close()
            os.unlink(self.path)
            self._file = self.path = None


def _size(n: int) -> str:
    return f"{n / (1 << 20):.0f} MB" if n >= 1 << 20 else f"{n} bytes"

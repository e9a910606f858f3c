"""A session: its id, its message list, and its append-only JSONL transcript.

Transcript lines (one JSON object each, flushed as written):
  {"type": "meta", "session_id", "cwd", "model", "engine", "created", "version": 1}   first line
  {"type": "message", "message": {...}}         every message appended to the history, verbatim
  {"type": "usage", "turn": n, "usage": {...}}  per engine call: reused vs prefilled tokens
  {"type": "result", ...}                        end of a run: stop reason, turns, duration
  {"type": "rewind", "to_message_index": n, "epoch"?: e}   keep the first n messages of epoch e (default: now)
  {"type": "compaction", "messages": [...], "todos": [...], ...}   the history is replaced by `messages`
  {"type": "clear", "edits": [[i, text], ...]}   old tool results i get a placeholder content
Restoring a session replays the "message" lines and applies rewind/compaction/clear records in
order; anything else is bookkeeping. Each compaction and rewind starts a new epoch (a new message
list); earlier lists stay in `archive`, so a checkpoint (epoch, index) can be restored after either.
A truncated or corrupt line (a crash mid-write) is skipped with a warning.
"""
from __future__ import annotations

import dataclasses
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from agent.core import events as ev
from agent.core.text_safety import scrub
from agent.paths import data_dir, project_sessions_dir

TRANSCRIPT_VERSION = 1


class SessionError(Exception):
    """A session cannot be found or read; the message is one line."""


@dataclass
class Session:
    session_id: str
    transcript_path: Path
    messages: list[dict] = field(default_factory=list)
    next_tool_id: int = 1
    warnings: list[str] = field(default_factory=list)
    resumed: bool = False
    epoch: int = 0  # the live message list's number; compaction and rewind start a new one
    archive: dict[int, list[dict]] = field(default_factory=dict)  # earlier epochs' message lists
    todos_at: dict[int, list[dict]] = field(default_factory=dict)  # epoch -> todo list a compaction recorded
    _file: IO[str] | None = None
    _needs_newline: bool = False  # the transcript ends mid-line (a crash while writing)

    @classmethod
    def create(cls, project_dir: Path, meta: dict | None = None) -> "Session":
        sid = str(uuid.uuid4())
        path = project_sessions_dir(project_dir) / f"{sid}.jsonl"
        s = cls(sid, path)
        s._write({"type": "meta", "session_id": sid, "cwd": str(project_dir), "created": time.time(),
                  "version": TRANSCRIPT_VERSION, **(meta or {})})
        return s

    @classmethod
    def load(cls, path: Path) -> "Session":
        """The session stored at `path`, its messages restored exactly; further events append to it."""
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise SessionError(f"cannot read transcript {path}: {e.strerror}") from None
        lines = raw.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        s = cls(path.stem, path, resumed=True)
        ever: list[dict] = []
        for n, data in enumerate(lines, 1):
            line = data.decode("utf-8", errors="replace")  # a damaged byte, or a write cut inside a character
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                kind = entry["type"]
            except (json.JSONDecodeError, KeyError, TypeError):
                s.warnings.append(f"{path.name}: skipped unreadable line {n}")
                continue
            if not _is_utf8(data):
                s.warnings.append(f"{path.name}: line {n} is not valid UTF-8; its undecodable bytes were replaced")
            if kind == "meta":
                s.session_id = entry.get("session_id", s.session_id)
            elif kind == "message" and isinstance(entry.get("message"), dict):
                s.messages.append(entry["message"])
                ever.append(entry["message"])
            elif kind == "rewind" and isinstance(entry.get("to_message_index"), int):
                source = entry.get("epoch", s.epoch)
                s._new_epoch((s.messages_at(source) or s.messages)[:max(0, entry["to_message_index"])], source)
            elif kind == "compaction" and isinstance(entry.get("messages"), list):
                s._new_epoch(entry["messages"], todos=entry.get("todos") or [])
            elif kind == "clear" and isinstance(entry.get("edits"), list):
                s._apply_clear(entry["edits"])
        # Ids stay unique across rewinds: count every call ever made in the session.
        s.next_tool_id = 1 + max((_tool_number(c.get("id", "")) for m in ever for c in m.get("tool_calls") or []),
                                 default=0)
        if raw and not raw.endswith(b"\n"):
            s._needs_newline = True
        return s

    def last_todos(self) -> list[dict]:
        """The todo list as the last TodoWrite call in the history left it (to restore on resume)."""
        for m in reversed(self.messages):
            for c in reversed(m.get("tool_calls") or []):
                todos = c["function"]["arguments"].get("todos") if c["function"]["name"] == "TodoWrite" else None
                if isinstance(todos, list):
                    return [dict(t) for t in todos if isinstance(t, dict)]
        return [dict(t) for t in self.todos_at.get(self.epoch, [])]  # as the last compaction left it

    def messages_at(self, epoch: int) -> list[dict] | None:
        """The message list of `epoch` (the live one or an archived one), None when unknown."""
        return self.messages if epoch == self.epoch else self.archive.get(epoch)

    def replace_messages(self, messages: list[dict], record: dict, *, source_epoch: int | None = None,
                         todos: list[dict] | None = None) -> None:
        """Compaction or rewind: `record` goes to the transcript (append-only), `messages` become a new epoch."""
        self._write(record)
        self._new_epoch(messages, source_epoch, todos)

    def clear_results(self, edits: list[tuple[int, str]], record: dict) -> None:
        """Replace the content of the messages at the given indexes (stale tool results), recorded."""
        self._write({**record, "type": "clear", "edits": [list(e) for e in edits]})
        self._apply_clear(edits)

    def _new_epoch(self, messages: list[dict], source_epoch: int | None = None,
                   todos: list[dict] | None = None) -> None:
        todos = todos if todos is not None else self.todos_at.get(self.epoch if source_epoch is None else source_epoch)
        self.archive[self.epoch] = self.messages
        self.epoch += 1
        self.messages = list(messages)
        if todos is not None:
            self.todos_at[self.epoch] = [dict(t) for t in todos]

    def _apply_clear(self, edits) -> None:
        for i, text in edits:
            if isinstance(i, int) and 0 <= i < len(self.messages) and isinstance(text, str):
                self.messages[i] = {**self.messages[i], "content": text}

    def new_tool_id(self) -> str:
        tid = f"toolu_{self.next_tool_id}"
        self.next_tool_id += 1
        return tid

    def append(self, message: dict) -> None:
        """Add a message to the history and the transcript (append-only: nothing is ever rewritten)."""
        self.messages.append(message)
        self._write({"type": "message", "message": message})

    def record(self, entry: dict) -> None:
        self._write(entry)

    def recorder(self, event: ev.Event) -> None:
        """EventBus subscriber: usage per turn and the session's end go to the transcript."""
        if isinstance(event, ev.TurnUsage):
            self._write({"type": "usage", "turn": event.turn, "usage": dataclasses.asdict(event.usage)})
        elif isinstance(event, ev.SessionEnd):
            self._write({"type": "end", "reason": event.reason, "ts": time.time()})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write(self, entry: dict) -> None:
        if self._file is None:
            self.transcript_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.transcript_path, "a", encoding="utf-8")
            if self._needs_newline:
                self._file.write("\n")  # end the truncated line so it stays one skipped line
        self._file.write(scrub(json.dumps(entry, ensure_ascii=False)) + "\n")  # never a UnicodeEncodeError
        self._file.flush()


def prune_kv_files(project_dir: Path, keep: int = 3) -> list[Path]:
    """Delete saved KV caches (tens of MB each) beyond the `keep` most recent of this project."""
    d = project_sessions_dir(project_dir)
    found = sorted(d.glob("*.kv"), key=lambda p: p.stat().st_mtime_ns, reverse=True) if d.is_dir() else []
    for old in found[keep:]:
        old.unlink(missing_ok=True)
    return found[keep:]


def latest_session(project_dir: Path) -> Path:
    """The most recently written transcript of this project."""
    d = project_sessions_dir(project_dir)
    found = sorted(d.glob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns) if d.is_dir() else []
    if not found:
        raise SessionError(f"no earlier session in {project_dir} to continue")
    return found[-1]


def find_session(session_id: str, project_dir: Path) -> Path:
    """The transcript of `session_id`: this project's first, then any project's."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", session_id):
        raise SessionError(f"not a session id: {session_id!r}")
    here = project_sessions_dir(project_dir) / f"{session_id}.jsonl"
    if here.is_file():
        return here
    found = sorted((data_dir() / "projects").glob(f"*/{session_id}.jsonl"))
    if not found:
        raise SessionError(f"no session {session_id} (looked under {data_dir() / 'projects'})")
    return found[0]


def _tool_number(tool_id: str) -> int:
    m = re.fullmatch(r"toolu_(\d+)", tool_id)
    return int(m.group(1)) if m else 0


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False

"""Prompt history, persisted per project under the data directory (shared by the TUI and plain mode).

One JSON file per project: `<data_dir>/history/<project_key>.json`, a list of prompts, oldest
first, capped at MAX_ENTRIES. It lives outside the project's transcript directory so session
listings never see it. Writes are atomic (temp file + os.replace); a broken file reads as empty.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from agent.paths import data_dir, project_key

MAX_ENTRIES = 1000


def history_path(project_dir: Path) -> Path:
    return data_dir() / "history" / f"{project_key(project_dir)}.json"


@dataclass
class PromptHistory:
    path: Path
    entries: list[str] = field(default_factory=list)  # oldest first
    error: str | None = None  # the last load/save problem, one line, for the UI to show once

    @classmethod
    def for_project(cls, project_dir: Path) -> "PromptHistory":
        return cls.load(history_path(project_dir))

    @classmethod
    def load(cls, path: Path) -> "PromptHistory":
        h = cls(Path(path))
        try:
            data = json.loads(h.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return h
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            h.error = f"prompt history {h.path} is unreadable ({type(e).__name__}); starting empty"
            return h
        if isinstance(data, list):
            h.entries = [x for x in data if isinstance(x, str)][-MAX_ENTRIES:]
        return h

    def add(self, prompt: str) -> None:
        """Remember `prompt` (not blank, not a repeat of the last one) and save."""
        if not prompt.strip() or (self.entries and self.entries[-1] == prompt):
            return
        self.entries.append(prompt)
        del self.entries[:-MAX_ENTRIES]
        self.save()

    def save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".history.", suffix=".tmp", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.entries, f, ensure_ascii=False)
            os.replace(tmp, self.path)
        except OSError as e:  # a read-only data dir must not break the session
            self.error = f"cannot save prompt history to {self.path} ({e.strerror or e})"


@dataclass
class HistoryCursor:
    """Up/Down navigation over a PromptHistory, keeping the draft that was being typed."""
    history: PromptHistory
    index: int | None = None  # into history.entries; None = at the draft
    draft: str = ""

    def older(self, current: str) -> str | None:
        """The previous entry, or None when there is none."""
        entries = self.history.entries
        if not entries or self.index == 0:
            return None
        if self.index is None:
            self.draft, self.index = current, len(entries)
        self.index -= 1
        return entries[self.index]

    def newer(self) -> str | None:
        """The next entry (the draft after the newest), or None when already at the draft."""
        if self.index is None:
            return None
        self.index += 1
        if self.index >= len(self.history.entries):
            self.index = None
            return self.draft
        return self.history.entries[self.index]

    def reset(self) -> None:
        self.index, self.draft = None, ""

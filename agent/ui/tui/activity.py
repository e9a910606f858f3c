"""ActivityLine: what the agent is doing right now (working, loading, prefill progress), and the queue."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
BAR_WIDTH = 24


class ActivityLine(Static):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.label = ""  # "" = idle (hidden)
        self.started = 0.0
        self.progress: tuple[str, int, int] | None = None  # (what, done, total)
        self.queued: list[str] = []
        self.display = False

    def start(self, label: str) -> None:
        self.label, self.started, self.progress = label, self.app.clock(), None
        self.refresh_line()

    def stop(self) -> None:
        self.label, self.progress = "", None
        self.refresh_line()

    def set_progress(self, what: str, done: int, total: int) -> None:
        self.progress = (what, done, total) if total and done < total else None
        self.refresh_line()

    def set_queue(self, queued: list[str]) -> None:
        self.queued = list(queued)
        self.refresh_line()

    def refresh_line(self) -> None:
        out = Text()
        if self.label:
            elapsed = self.app.clock() - self.started
            out.append(SPINNER[int(elapsed * 10) % len(SPINNER)] + " ", style="yellow")
            out.append(self.label, style="bold")
            if self.progress:
                what, done, total = self.progress
                filled = BAR_WIDTH * done // total
                out.append(f"  {what} {done}/{total} ", style="dim")
                out.append("█" * filled + "░" * (BAR_WIDTH - filled), style="cyan")
            out.append(f"  {elapsed:.0f}s · esc to interrupt", style="dim")
        for q in self.queued:
            if out:
                out.append("\n")
            first = q.splitlines()[0] if q.strip() else q
            out.append(f"queued: {first[:100]}", style="dim italic")
        self.display = bool(out)
        self.update(out)

"""StatusBar: the mode line and the session figures under the prompt."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from agent.session.status import StatusInfo, format_figures, format_place

MODE_LABELS = {"default": ("default mode", "dim"), "acceptEdits": ("⏵⏵ accept edits on", "magenta"),
               "plan": ("⏸ plan mode on", "cyan"), "bypassPermissions": ("⏵⏵ bypass permissions on", "red"),
               "dontAsk": ("don't ask mode", "yellow")}


class StatusBar(Static):
    def show(self, info: StatusInfo | None, hint: str = "") -> None:
        """info None: the session is still starting (the model is loading)."""
        if info is None:
            self.update(Text("starting…", style="dim"))
            return
        label, style = MODE_LABELS.get(info.mode, (info.mode, "dim"))
        line = Text()
        line.append(label, style=style)
        line.append(" (shift+tab to cycle)", style="dim")
        line.append(" · " + format_place(info), style="dim")
        if hint:
            line.append(" · " + hint, style="bold")
        line.append("\n")
        line.append(format_figures(info), style="dim")
        self.update(line)

"""ToolBlock: one tool call in the transcript, from "requested" through "running" to its result."""
from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Collapsible, Static

from agent.ui.tui import tool_render
from tools.base import ToolResult

BASH_OPEN_LINES = 8  # Bash output up to this many lines starts expanded
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class ToolBlock(Vertical):
    DEFAULT_CLASSES = "tool-block"

    def __init__(self, tool_use_id: str, name: str, args: dict) -> None:
        self.tool_use_id, self.tool_name, self.args = tool_use_id, name, args
        self.state = "requested"  # "requested" | "asking" (permission) | "running" | "done" | "error"
        self.started_at: float | None = None
        self.result: ToolResult | None = None
        # A child from the start (not compose): the body mounted by finish() must come after it.
        self._header = Static(self._header_text(), classes="tool-header")
        super().__init__(self._header, id=f"tool-{tool_use_id}" if tool_use_id.replace("_", "").isalnum() else None)

    def running(self, args: dict) -> None:
        self.args, self.state, self.started_at = args, "running", self.app.clock()
        self._header.update(self._header_text())

    def asking(self) -> None:
        self.state = "asking"
        self._header.update(self._header_text())

    def tick(self) -> None:
        """Advance the spinner and elapsed time (the app calls it while the call runs)."""
        if self.state == "running":
            self._header.update(self._header_text())

    def finish(self, args: dict, result: ToolResult) -> None:
        self.args, self.result = args, result
        self.state = "error" if result.is_error else "done"
        self._header.update(self._header_text())
        self.mount(Static(tool_render.body(self.tool_name, args, result), classes="tool-body"))
        if self.tool_name == "Bash":
            output = tool_render.bash_output(result)
            if output and output != "(no output)":
                lines = output.count("\n") + 1
                self.mount(Collapsible(Static(Text(output), classes="bash-output"),
                                       title=f"output ({lines} line{'s' * (lines != 1)})",
                                       collapsed=lines > BASH_OPEN_LINES, classes="tool-output"))
        elif self.tool_name == "Task" and not result.is_error and result.content.strip():
            self.mount(Collapsible(Static(Text(result.content.strip()), classes="task-report"),
                                   title="report", collapsed=True, classes="tool-output"))

    def _header_text(self) -> Text:
        out = Text()
        if self.state == "running":
            elapsed = self.app.clock() - self.started_at
            out.append(SPINNER[int(elapsed * 10) % len(SPINNER)] + " ", style="yellow")
        else:
            out.append("● ", style={"requested": "dim", "asking": "yellow", "done": "green", "error": "red"}[self.state])
        out.append_text(tool_render.header(self.tool_name, self.args))
        if self.state == "asking":
            out.append("  waiting for your approval", style="yellow")
        if self.state == "running":
            what = "subagent working" if self.tool_name == "Task" else "running"
            out.append(f"  {what} {elapsed:.0f}s", style="dim")
        return out

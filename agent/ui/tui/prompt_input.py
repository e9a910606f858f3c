"""PromptInput: the multi-line prompt editor with history and `/` / `@` completion.

Enter sends; Shift+Enter, Alt+Enter, Ctrl+J (or a trailing backslash + Enter) insert a newline.
Up on the first line and Down on the last walk the project's prompt history. While the
completion menu is open, Up/Down move in it, Tab accepts, Enter accepts (and runs a `/command`),
Esc closes it.
"""
from __future__ import annotations

import re

from rich.text import Text
from textual import events
from textual.widgets import TextArea

from agent.ui.history import HistoryCursor, PromptHistory
from agent.ui.slash import SlashRegistry
from agent.ui.tui.completion import CompletionMenu
from agent.ui.tui.messages import PromptSubmitted

NEWLINE_KEYS = ("shift+enter", "ctrl+j", "alt+enter")
_MENTION_AT_CURSOR = re.compile(r"(?:^|\s)(@\S*)$")


class PromptInput(TextArea):
    def __init__(self, registry: SlashRegistry, history: PromptHistory, menu: CompletionMenu, **kw) -> None:
        super().__init__(soft_wrap=True, show_line_numbers=False, compact=True, **kw)
        self.registry, self.menu = registry, menu
        self.prompt_history = HistoryCursor(history)
        self._navigating = False  # set while history text is loaded, so it does not open the menu

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        handled = True
        if self.menu.display and key in ("up", "down"):
            self.menu.move(-1 if key == "up" else 1)
        elif self.menu.display and key in ("tab", "enter") and self.menu.value is not None:
            value = self.menu.value
            self._accept(value)
            if key == "enter" and value.startswith("/"):  # Enter on a command runs it, as typed in full
                self._submit()
        elif self.menu.display and key == "escape":
            self.menu.hide()
        elif key in NEWLINE_KEYS:
            self.insert("\n")
        elif key == "enter":
            row, col = self.cursor_location
            line = self.document.get_line(row)
            if col == len(line) and line.endswith("\\"):
                self.replace("\n", (row, col - 1), (row, col))
            else:
                self._submit()
        elif key == "up" and self.cursor_location[0] == 0:
            self._load(self.prompt_history.older(self.text))
        elif key == "down" and self.cursor_location[0] == self.document.line_count - 1:
            self._load(self.prompt_history.newer())
        else:
            handled = False
        if handled:
            event.stop()
            event.prevent_default()

    def _submit(self) -> None:
        text = self.text.rstrip().lstrip("\n")
        if not text.strip():
            return
        self.menu.hide()
        self.prompt_history.reset()
        self.clear()
        self.post_message(PromptSubmitted(text))

    def _load(self, text: str | None) -> None:
        if text is None:
            return
        self._navigating = True
        self.load_text(text)
        self.move_cursor(self.document.end)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self._navigating:
            self._navigating = False
            self.menu.hide()
            return
        self.menu.show(self._suggestions())

    def _suggestions(self) -> list[tuple[Text, str]]:
        text = self.text
        if text.startswith("/") and " " not in text and "\n" not in text and SlashRegistry.is_command(text + "x"):
            return [(_label(f"/{c.name}" + (f" {c.argument_hint}" if c.argument_hint else ""), c.description),
                     f"/{c.name} ") for c in self.registry.complete(text)][:12]
        row, col = self.cursor_location
        m = _MENTION_AT_CURSOR.search(self.document.get_line(row)[:col])
        if m:
            return [(Text("@" + f), f"@{f} ") for f in self.registry.complete_file(m.group(1)[1:])]
        return []

    def _accept(self, value: str) -> None:
        """Replace the word being completed (the `/name` or `@path` before the cursor) with `value`."""
        row, col = self.cursor_location
        before = self.document.get_line(row)[:col]
        if value.startswith("/"):
            start = (0, 0)
        else:
            m = _MENTION_AT_CURSOR.search(before)
            start = (row, m.start(1) if m else col)
        self.replace(value, start, (row, col))
        self.menu.hide()


def _label(name: str, description: str) -> Text:
    out = Text()
    out.append(name.ljust(22), style="bold")
    out.append(description, style="dim")
    return out

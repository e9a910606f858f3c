"""CompletionMenu: the `/command` and `@file` suggestions shown above the prompt input."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option


class CompletionMenu(OptionList):
    """Shown with items, hidden without; the input drives it (it never takes focus)."""

    can_focus = False

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.values: list[str] = []  # what accepting each item inserts
        self.display = False

    def show(self, items: list[tuple[Text | str, str]]) -> None:
        """items: (label, inserted text); an empty list hides the menu."""
        self.clear_options()
        self.values = [value for _, value in items]
        if not items:
            self.display = False
            return
        self.add_options([Option(label) for label, _ in items])
        self.highlighted = 0
        self.display = True

    def hide(self) -> None:
        self.show([])

    def move(self, delta: int) -> None:
        if self.values:
            self.highlighted = ((self.highlighted or 0) + delta) % len(self.values)

    @property
    def value(self) -> str | None:
        if not self.display or self.highlighted is None or not self.values:
            return None
        return self.values[self.highlighted]

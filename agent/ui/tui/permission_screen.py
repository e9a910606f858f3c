"""PermissionScreen: allow once / always allow (the suggested rules, shown) / deny with feedback."""
from __future__ import annotations

import json

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from agent.core.approval import PermissionAnswer, PermissionRequest
from agent.ui.tui import tool_render

TITLES = {"Bash": "Bash command", "Edit": "Edit file", "MultiEdit": "Edit file", "Write": "Write file"}


class PermissionScreen(ModalScreen[PermissionAnswer]):
    BINDINGS = [
        Binding("1,y", "answer('once')", "Yes", show=False),
        Binding("2,a", "answer('always')", "Always", show=False),
        Binding("3,n", "answer('deny')", "No", show=False),
        Binding("escape", "deny_now", "Deny", show=False),
    ]

    def __init__(self, request: PermissionRequest) -> None:
        super().__init__()
        self.request = request
        self.choices = ["once"] + (["always"] if request.rules else []) + ["deny"]

    def compose(self) -> ComposeResult:
        r = self.request
        with Vertical(id="permission-dialog"):
            yield Static(Text(TITLES.get(r.tool_name, f"{r.tool_name} tool"), style="bold"), id="permission-title")
            yield Static(self._subject(), id="permission-subject")
            if r.reason:
                yield Static(Text(r.reason, style="dim"), id="permission-reason")
            yield Static("Do you want to proceed?")
            labels = {"once": "Yes",
                      "always": "Yes, and always allow " + ", ".join(r.rules) + " (.agent/settings.local.json)",
                      "deny": "No, and tell the agent what to do differently"}
            yield OptionList(*[Option(f"{i}. {labels[c]}", id=c) for i, c in enumerate(self.choices, 1)],
                             id="permission-choices")
            yield Input(placeholder="what should the agent do instead? (Enter to send)", id="permission-feedback")
            yield Static(Text("1/2/3 or y/a/n · esc to deny", style="dim"))

    def on_mount(self) -> None:
        self.query_one("#permission-feedback", Input).display = False
        self.query_one("#permission-choices", OptionList).focus()

    def _subject(self) -> Group | Text:
        r = self.request
        if r.tool_name == "Bash":
            return Text(str(r.tool_input.get("command", "")), style="bold")
        if r.preview is not None:
            path = str(r.tool_input.get("file_path", ""))
            return Group(Text(path, style="bold"), tool_render.render_diff(r.preview, path))
        return Text(json.dumps(r.tool_input, ensure_ascii=False, indent=1)[:2000])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_answer(event.option.id)

    def action_answer(self, choice: str) -> None:
        if choice == "always" and not self.request.rules:
            return
        if choice == "deny":
            feedback = self.query_one("#permission-feedback", Input)
            feedback.display = True
            feedback.focus()
            return
        self.dismiss(PermissionAnswer(choice))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(PermissionAnswer("deny", event.value))

    def action_deny_now(self) -> None:
        self.dismiss(PermissionAnswer("deny", self.query_one("#permission-feedback", Input).value))

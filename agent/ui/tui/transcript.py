"""Transcript: the scrolling conversation (user prompts, streamed markdown, tool blocks, notices)."""
from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from agent.core.model_text import STOP_HOOK_PREFIX, user_text
from agent.ui.tui.tool_block import ToolBlock
from tools.base import ToolResult


class Transcript(VerticalScroll):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.blocks: dict[str, ToolBlock] = {}  # tool_use_id -> block
        self._markdown: Markdown | None = None  # the assistant text being streamed
        self._stream: MarkdownStream | None = None
        self._streamed = ""  # the text streamed into _markdown so far

    def mount(self, *widgets, **kw):
        """Mount, then keep following the end if the view was at the end (the user scrolled up: stay)."""
        at_end = self.scroll_y >= self.max_scroll_y - 1
        done = super().mount(*widgets, **kw)
        if at_end:
            self.call_after_refresh(self.scroll_end, animate=False)
        return done

    def add_user(self, text: str) -> None:
        self.mount(Static(Text("> " + text), classes="user"))

    def add_notice(self, text: str, style: str = "notice") -> None:
        self.mount(Static(Text(text), classes=style))

    def add_markdown(self, text: str, classes: str = "command-output") -> None:
        self.mount(Markdown(text, classes=classes))

    async def append_text(self, text: str) -> None:
        if self._stream is None:
            self._markdown = Markdown(classes="assistant")
            await self.mount(self._markdown)
            self._stream = Markdown.get_stream(self._markdown)
        self._streamed += text
        if self.scroll_y >= self.max_scroll_y - 1:
            self.call_after_refresh(self.scroll_end, animate=False)
        await self._stream.write(text)

    async def end_text(self, final: str | None = None) -> None:
        """The assistant message is complete; the next text starts a new block.

        `final` is the message as the history keeps it; it wins over what streamed (the loop drops
        a tool call that a small model wrote as bare JSON and that streamed as text first).
        """
        if self._stream is not None:
            await self._stream.stop()
        if self._markdown is not None and final is not None and final != self._streamed:
            if final.strip():
                await self._markdown.update(final)
            else:
                await self._markdown.remove()
        self._stream = self._markdown = None
        self._streamed = ""

    async def add_tool_calls(self, message: dict) -> None:
        """Blocks for the calls of an assistant message, mounted before any result arrives for them."""
        blocks = [ToolBlock(c["id"], c["function"]["name"], c["function"]["arguments"])
                  for c in message.get("tool_calls") or []]
        self.blocks.update((b.tool_use_id, b) for b in blocks)
        if blocks:
            await self.mount_all(blocks)

    def tool_running(self, tool_use_id: str, args: dict) -> None:
        if tool_use_id in self.blocks:
            self.blocks[tool_use_id].running(args)

    def tool_asking(self, tool_name: str) -> ToolBlock | None:
        """The running call of `tool_name` now waits for a permission answer (the loop asks after PreToolUse)."""
        block = next((b for b in reversed(self.blocks.values()) if b.state == "running" and b.tool_name == tool_name),
                     None)
        if block is not None:
            block.asking()
        return block

    def tool_done(self, tool_use_id: str, name: str, args: dict, result: ToolResult) -> None:
        block = self.blocks.get(tool_use_id)
        if block is None:  # a call the model never made visible (should not happen); show it anyway
            block = self.blocks[tool_use_id] = ToolBlock(tool_use_id, name, args)
            self.mount(block)
        block.finish(args, result)

    def tick(self) -> None:
        for block in self.blocks.values():
            block.tick()

    async def clear(self) -> None:
        await self.end_text()
        self.blocks.clear()
        await self.remove_children()

    async def replay(self, messages: list[dict]) -> None:
        """Draw a resumed conversation from its history (results have text only, no diffs or exit codes)."""
        for msg in messages:
            role = msg.get("role")
            if role == "user":
                text = user_text(str(msg.get("content", "")))
                if text.startswith(STOP_HOOK_PREFIX):
                    self.add_notice(text)
                else:
                    self.add_user(text)
            elif role == "assistant":
                if msg.get("content"):
                    await self.mount(Markdown(msg["content"], classes="assistant"))
                await self.add_tool_calls(msg)
            elif role == "tool":
                content = str(msg.get("content", ""))
                self.tool_done(msg.get("tool_call_id", ""), msg.get("name", ""),
                               self.blocks[msg["tool_call_id"]].args if msg.get("tool_call_id") in self.blocks
                               else {}, ToolResult(content, is_error=content.startswith(("Error", "Not run"))))

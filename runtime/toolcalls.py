"""Streaming tool-call parsing for Qwen-style `<tool_call>{json}</tool_call>` output.

Works on decoded text, so it does not care whether the model emitted the tags as the added
tokens or as plain text pieces. Text outside calls streams out as soon as it cannot be the
start of an opening tag.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


@dataclass
class ParsedCall:
    name: str
    arguments: dict
    raw: str
    error: str | None = None


@dataclass
class ToolCallParser:
    """feed(text) -> list of str (text to show) and ParsedCall, in order; finish() flushes."""
    tool_names: frozenset[str] = frozenset()
    _buf: str = ""
    _in_call: bool = False
    calls: list[ParsedCall] = field(default_factory=list)
    text: list[str] = field(default_factory=list)  # all visible text emitted

    def feed(self, delta: str) -> list:
        self._buf += delta
        out: list = []
        while True:
            if self._in_call:
                end = self._buf.find(CLOSE)
                if end < 0:
                    return out
                out.append(self._parse(self._buf[:end]))
                self._buf = self._buf[end + len(CLOSE):]
                self._in_call = False
                continue
            start = self._buf.find(OPEN)
            if start >= 0:
                self._emit_text(self._buf[:start], out)
                self._buf = self._buf[start + len(OPEN):]
                self._in_call = True
                continue
            # Hold back a tail that could still grow into "<tool_call>".
            keep = _partial_suffix(self._buf, OPEN)
            self._emit_text(self._buf[:len(self._buf) - keep], out)
            self._buf = self._buf[len(self._buf) - keep:]
            return out

    def finish(self) -> list:
        """End of generation: an unclosed call is parsed as is (models often stop before the close tag)."""
        out: list = []
        if self._in_call:
            out.append(self._parse(self._buf))
        else:
            self._emit_text(self._buf, out)
        self._buf, self._in_call = "", False
        if not self.calls and self.tool_names:
            bare = _bare_call("".join(self.text), self.tool_names)
            if bare is not None:
                self.calls.append(bare)
                out.append(bare)
        return out

    def _emit_text(self, s: str, out: list) -> None:
        if s:
            self.text.append(s)
            out.append(s)

    def _parse(self, raw: str) -> ParsedCall:
        call = parse_call_json(raw)
        self.calls.append(call)
        return call


def parse_call_json(raw: str) -> ParsedCall:
    body = raw.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        return ParsedCall("", {}, raw, f"tool call is not valid JSON ({e.msg} at char {e.pos})")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ParsedCall("", {}, raw, 'tool call must be an object {"name": ..., "arguments": {...}}')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            return ParsedCall(obj["name"], {}, raw, f"tool call arguments are not valid JSON ({e.msg})")
    if not isinstance(args, dict):
        return ParsedCall(obj["name"], {}, raw, "tool call arguments must be a JSON object")
    return ParsedCall(obj["name"], args, raw)


def _bare_call(text: str, tool_names: frozenset[str]) -> ParsedCall | None:
    """A reply that is nothing but a call object for an offered tool (small models drop the tags)."""
    body = text.strip()
    if not body.startswith(("{", "```")):
        return None
    call = parse_call_json(body)
    if call.error is None and call.name in tool_names:
        return call
    return None


def _partial_suffix(s: str, tag: str) -> int:
    """Length of the longest suffix of s that is a proper prefix of tag."""
    for n in range(min(len(tag) - 1, len(s)), 0, -1):
        if s.endswith(tag[:n]):
            return n
    return 0

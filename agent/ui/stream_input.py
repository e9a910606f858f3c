"""`agent -p --input-format stream-json --output-format stream-json`: many turns in one process.

User messages arrive on stdin as JSON lines in Claude Code's SDK shape,
{"type": "user", "message": {"role": "user", "content": "..." | [{"type": "text", "text": "..."}]}};
each one runs as a prompt of the same session (the model's KV cache stays resident, so a turn prefills only
its new tokens) and is answered with stream-json lines ending in a result line. The init line comes once.
A line that is not such a message is reported on stderr in one line and skipped; EOF ends the session.
"""
from __future__ import annotations

import json
import threading
from typing import IO, Callable, Iterable

from agent.core import events as ev
from agent.core.results import result_object
from agent.session.core import SessionCore
from agent.ui.headless import StreamJsonPrinter


class InputError(ValueError):
    """A stdin line that is not a user message; one line."""


def user_prompt(line: str) -> str:
    """The text of one stdin line's user message."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"not JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict) or obj.get("type") != "user":
        kind = obj.get("type") if isinstance(obj, dict) else type(obj).__name__
        raise InputError(f"expected a message of type \"user\", got {kind!r}")
    message = obj.get("message")
    if not isinstance(message, dict) or message.get("role", "user") != "user":
        raise InputError('expected "message": {"role": "user", "content": ...}')
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list) and content:
        texts = []
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                kind = block.get("type") if isinstance(block, dict) else type(block).__name__
                raise InputError(f"only text content blocks are supported, got {kind!r}")
            texts.append(block["text"])
        text = "\n\n".join(texts)
    else:
        raise InputError("message content must be a string or a list of text blocks")
    if not text.strip():
        raise InputError("the message is empty")
    return text


def run_stream_input(core: SessionCore, lines: Iterable[str], *, prepare: Callable[[str, bool], str],
                     cancel: threading.Event, out: IO[str], err: IO[str]) -> int:
    """Run each user message as a turn; 0 when every turn and line was fine, else 1.

    prepare(prompt, first) expands `/command` prompts (and narrows the tools before the first request).
    """
    printer = StreamJsonPrinter(out, core.mcp.init_entries if core.mcp else list)
    core.subscribe(printer)
    core.offer_mcp_tools()
    core.start()
    agent = core.agent
    code, first, result = 0, True, None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            prompt = user_prompt(line)
        except InputError as e:
            err.write(f"agent: stdin line {number}: {e}; skipped\n")
            err.flush()
            code = 1
            continue
        prompt = prepare(prompt, first)
        first = False
        core.offer_mcp_tools()
        result = agent.run(prompt, cancel)
        obj = result_object(result, agent.session.session_id)
        agent.session.record({k: v for k, v in obj.items() if k != "type"} | {"type": "result"})
        printer.write(obj)
        if result.is_error:
            code = 1
        if result.stop_reason == "cancelled":
            break  # Ctrl-C: the session ends after this turn's result
    reason = "interrupted" if result is not None and result.stop_reason == "cancelled" else "exit"
    agent.emit(ev.SessionEnd(reason=reason))
    return code

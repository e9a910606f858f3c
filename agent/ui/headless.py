"""Headless mode (`agent -p`): run one prompt through the loop and print text, json or stream-json.

stream-json lines follow FORMATS.md (Claude Code's shapes): a system init line, one assistant
line per engine call (text and tool_use blocks, plus that call's usage), one user line per tool
result, and a final result line. json prints only the result object; text prints the answer.
Result objects also carry `stop_reason` (our finer reason) and `turn_usage` (reused vs
prefilled tokens per engine call), which Claude Code consumers ignore.
"""
from __future__ import annotations

import json
import sys
import threading
from typing import IO, Callable

from agent.core import events as ev
from agent.services.compaction import ContextCompacted
from agent.session.core import SessionCore
from agent.core.results import result_object, usage_block

OUTPUT_FORMATS = ("text", "json", "stream-json")


class StreamJsonPrinter:
    """EventBus subscriber writing one JSON object per line."""

    def __init__(self, out: IO[str], mcp_servers: Callable[[], list[dict]] = list) -> None:
        self.out = out
        self.mcp_servers = mcp_servers  # [{name, status}] for the init line

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.SessionStart) and e.source != "compact":  # after compaction: compact_boundary
            self.write({"type": "system", "subtype": "init", "session_id": e.session_id, "cwd": e.cwd,
                        "model": e.model, "tools": e.tools, "mcp_servers": self.mcp_servers(),
                        "permissionMode": e.permission_mode})
        elif isinstance(e, ev.AssistantTurn):
            content: list[dict] = [{"type": "text", "text": e.message["content"]}] if e.message["content"] else []
            content += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                         "input": c["function"]["arguments"]} for c in e.message.get("tool_calls") or []]
            self.write({"type": "assistant", "message": {"role": "assistant", "content": content,
                                                         "usage": usage_block(e.usage)},
                        "session_id": e.session_id})
        elif isinstance(e, ev.ToolResultEvent):
            block = {"type": "tool_result", "tool_use_id": e.tool_use_id, "content": e.result.content,
                     "is_error": e.result.is_error}
            self.write({"type": "user", "message": {"role": "user", "content": [block]}, "session_id": e.session_id})
        elif isinstance(e, ev.PipelineStep):
            self.write({"type": "system", "subtype": "pipeline_step", "session_id": e.session_id, "step": e.step,
                        "detail": e.detail})
        elif isinstance(e, ContextCompacted):  # Claude Code's compact_boundary line, plus our figures
            r = e.report
            self.write({"type": "system", "subtype": "compact_boundary", "session_id": e.session_id,
                        "compact_metadata": {"trigger": r.trigger, "pre_tokens": r.tokens_before,
                                             "post_tokens": r.tokens_after, "summary_usage": usage_block(r.summary_usage)}})

    def write(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.out.flush()


class VerbosePrinter:
    """For --verbose in text and json mode: a trace of turns and tool calls on stderr."""

    def __init__(self, err: IO[str]) -> None:
        self.err = err

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.AssistantTurn):
            u = e.usage
            self.err.write(f"[turn {e.turn}] {e.stop_reason}: prompt {u.prompt_tokens} tokens "
                           f"(reused {u.reused_tokens}, prefilled {u.prefilled_tokens}), "
                           f"generated {u.generated_tokens}\n")
            for c in e.message.get("tool_calls") or []:
                args = json.dumps(c["function"]["arguments"], ensure_ascii=False)
                self.err.write(f"  -> {c['function']['name']} {args[:200]}\n")
        elif isinstance(e, ev.ToolResultEvent):
            first = (e.result.content.splitlines() or [""])[0]
            self.err.write(f"  <- {e.tool_name}{' (error)' if e.result.is_error else ''}: {first[:200]}\n")
        elif isinstance(e, ev.PipelineStep):
            self.err.write(f"[{e.step}] {e.detail}\n")
        self.err.flush()


def run_headless(core: SessionCore, prompt: str, *, output_format: str, verbose: bool, cancel: threading.Event,
                 out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
    """Run `prompt` (as typed: no `@file` attachments), print it in `output_format`; the exit code (0 success, 1 error)."""
    assert output_format in OUTPUT_FORMATS, output_format
    printer = StreamJsonPrinter(out, core.mcp.init_entries if core.mcp else list) \
        if output_format == "stream-json" else None
    if printer:
        core.subscribe(printer)
    elif verbose:
        core.subscribe(VerbosePrinter(err))
    core.offer_mcp_tools()
    core.start()
    agent = core.agent
    result = agent.run(prompt, cancel)
    sid = agent.session.session_id
    agent.emit(ev.SessionEnd(reason="interrupted" if result.stop_reason == "cancelled" else
                             ("error" if result.is_error else "exit")))
    obj = result_object(result, sid)
    agent.session.record({k: v for k, v in obj.items() if k != "type"} | {"type": "result"})
    if printer:
        printer.write(obj)
    elif output_format == "json":
        out.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        if result.text:
            out.write(result.text.rstrip("\n") + "\n")
        if result.is_error:
            err.write(f"agent: {obj['result']} ({result.stop_reason})\n")
    out.flush()
    return 1 if result.is_error else 0

"""An engine for any OpenAI-compatible /v1/chat/completions server (vLLM, SGLang, llama.cpp, Ollama).

Streams SSE: text deltas as they come, tool calls assembled by index from argument fragments
and yielded when the stream ends, usage from the final chunk (stream_options.include_usage);
prompt_tokens_details.cached_tokens is the server's prefix-cache hit, reported as reused_tokens.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from typing import Iterator

import httpx

from runtime.api import Done, Request, TextDelta, ToolCall, Usage

_FINISH = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}


class OpenAIEngine:
    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 context_window: int = 32768, timeout_s: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = model
        self.api_key = api_key  # the CLI reads AGENT_API_KEY / OPENAI_API_KEY
        self._context_window = context_window
        self.timeout_s = timeout_s

    @property
    def context_window(self) -> int:
        return self._context_window

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4) if text else 0  # the server's tokenizer is not known here

    def stream(self, request: Request, *, cancel: threading.Event | None = None) -> Iterator:
        cancel = cancel or threading.Event()
        body = self._body(request)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = self.base_url + "/chat/completions"
        t0 = time.monotonic()
        text_parts: list[str] = []
        calls: dict[int, dict] = {}
        usage = None
        pieces = 0  # streamed deltas: about one token each, the fallback when a server sends no usage
        finish = None
        ttft = 0.0
        try:
            with httpx.Client(timeout=httpx.Timeout(self.timeout_s, connect=10.0)) as client:
                with client.stream("POST", url, json=body, headers=headers) as resp:
                    if resp.status_code >= 400:
                        resp.read()
                        yield Done(Usage(), "error", _http_error(resp))
                        return
                    # A blocked read cannot see the event; closing the response from a watcher unblocks it.
                    stop_watch = threading.Event()
                    watcher = threading.Thread(target=_close_on_cancel, args=(cancel, stop_watch, resp), daemon=True)
                    watcher.start()
                    try:
                        for chunk in _sse_chunks(resp, cancel):
                            if chunk.get("usage"):
                                usage = _usage(chunk["usage"])
                            for choice in chunk.get("choices") or []:
                                delta = choice.get("delta") or {}
                                if delta.get("content"):
                                    ttft = ttft or time.monotonic() - t0
                                    pieces += 1
                                    text_parts.append(delta["content"])
                                    yield TextDelta(delta["content"])
                                for tc in delta.get("tool_calls") or []:
                                    ttft = ttft or time.monotonic() - t0
                                    pieces += 1
                                    _merge_call_fragment(calls, tc)
                                finish = choice.get("finish_reason") or finish
                    finally:
                        stop_watch.set()
        except (httpx.HTTPError, httpx.StreamError, OSError) as e:
            if cancel.is_set():
                yield Done(usage or Usage(), "cancelled")
            else:
                yield Done(Usage(), "error", f"{type(e).__name__} talking to {url}: {e}".strip().rstrip(":"))
            return
        except ValueError as e:  # a chunk that is not JSON: the server is not OpenAI-compatible
            yield Done(Usage(), "error", f"bad stream from {url}: {e}")
            return
        if cancel.is_set():
            yield Done(usage or Usage(), "cancelled")
            return
        for i in sorted(calls):
            yield _finish_call(calls[i])
        if usage is None:  # an estimate; nothing is known about the server's cache
            prompt = self.count_tokens(json.dumps(body["messages"]) + json.dumps(body.get("tools", [])))
            usage = Usage(prompt_tokens=prompt, prefilled_tokens=prompt, generated_tokens=pieces)
        elapsed = time.monotonic() - t0
        usage.ttft_s = ttft
        if usage.generated_tokens and elapsed > ttft:
            usage.decode_tps = usage.generated_tokens / (elapsed - ttft)
        yield Done(usage, _FINISH.get(finish or "", "tool_use" if calls else "end_turn"))

    def _body(self, request: Request) -> dict:
        s = request.sampling
        body = {"model": self.model, "messages": [_wire_message(m) for m in request.messages], "stream": True,
                "stream_options": {"include_usage": True}, "temperature": s.temperature, "top_p": s.top_p,
                "max_tokens": s.max_tokens}
        if request.tools:
            body["tools"] = request.tools
            if request.tool_choice != "auto":
                body["tool_choice"] = request.tool_choice
        if s.seed is not None:
            body["seed"] = s.seed
        if s.top_k:
            body["top_k"] = s.top_k  # vLLM, SGLang and llama.cpp accept it; OpenAI ignores unknown sampling keys
        return body


def _wire_message(m: dict) -> dict:
    """Our message shape -> the wire shape: tool-call arguments travel as JSON strings."""
    if m.get("role") == "assistant" and m.get("tool_calls"):
        calls = [{"id": c["id"], "type": "function",
                  "function": {"name": c["function"]["name"],
                               "arguments": json.dumps(c["function"]["arguments"])}} for c in m["tool_calls"]]
        # content "" rather than null: llama.cpp's server rejects null, OpenAI and vLLM take both.
        return {"role": "assistant", "content": m.get("content") or "", "tool_calls": calls}
    if m.get("role") == "assistant":
        return {"role": "assistant", "content": m.get("content") or ""}
    return dict(m)


def _sse_chunks(resp: httpx.Response, cancel: threading.Event) -> Iterator[dict]:
    """JSON objects from `data:` lines until [DONE]; comments and other fields are skipped."""
    data: list[str] = []
    for line in resp.iter_lines():
        if cancel.is_set():
            return
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
            continue
        if line == "" and data:  # an empty line ends an event
            payload, data = "\n".join(data), []
            if payload.strip() == "[DONE]":
                return
            yield json.loads(payload)
    if data and "\n".join(data).strip() != "[DONE]":
        yield json.loads("\n".join(data))


def _merge_call_fragment(calls: dict[int, dict], tc: dict) -> None:
    i = tc.get("index", len(calls))
    call = calls.setdefault(i, {"id": "", "name": "", "arguments": ""})
    call["id"] = tc.get("id") or call["id"]
    fn = tc.get("function") or {}
    call["name"] += fn.get("name") or ""
    args = fn.get("arguments")
    if isinstance(args, dict):  # some servers send the parsed object at once
        args = json.dumps(args)
    call["arguments"] += args or ""


def _finish_call(call: dict) -> ToolCall:
    raw = call["arguments"]
    if not raw.strip():
        return ToolCall(call["id"], call["name"], {}, None, raw)
    try:
        args = json.loads(raw)
    except json.JSONDecodeError as e:
        return ToolCall(call["id"], call["name"], {}, f"tool call arguments are not valid JSON ({e.msg} at char {e.pos})", raw)
    if not isinstance(args, dict):
        return ToolCall(call["id"], call["name"], {}, "tool call arguments must be a JSON object", raw)
    return ToolCall(call["id"], call["name"], args, None, raw)


def _usage(u: dict) -> Usage:
    prompt = int(u.get("prompt_tokens") or 0)
    cached = int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return Usage(prompt_tokens=prompt, reused_tokens=cached, prefilled_tokens=prompt - cached,
                 generated_tokens=int(u.get("completion_tokens") or 0))


def _http_error(resp: httpx.Response) -> str:
    detail = resp.text.strip()
    try:
        err = resp.json().get("error")
        detail = err.get("message", detail) if isinstance(err, dict) else (err or detail)
    except (ValueError, AttributeError):
        pass
    detail = " ".join(str(detail).split())[:300]
    return f"HTTP {resp.status_code} from {resp.request.url}: {detail}"


def _close_on_cancel(cancel: threading.Event, stop: threading.Event, resp: httpx.Response) -> None:
    """On cancel, shut the socket down: that wakes a read blocked in another thread (close() does not)."""
    while not stop.is_set():
        if cancel.wait(0.05):
            stream = resp.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed
            return

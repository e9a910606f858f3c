"""The OpenAI-compatible engine against real HTTP servers on loopback.

Fast tests: a tiny http.server speaking SSE with canned chunks (fragmented tool calls, usage,
errors, a stream that stalls for cancellation). Slow test: llama.cpp's server on the default GGUF.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from agent.engines.openai import OpenAIEngine
from runtime.api import Done, Request, Sampling, TextDelta, ToolCall, Usage


class Canned(BaseHTTPRequestHandler):
    chunks: list = []  # dicts (sent as data: JSON), strings (sent raw), or ("sleep", seconds)
    status = 200
    bodies: list = []
    headers_seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        type(self).headers_seen.append(dict(self.headers))
        if self.status != 200:
            payload = json.dumps({"error": {"message": "model 'nope' not found\nsecond line"}}).encode()
            self.send_response(self.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            for c in self.chunks:
                if isinstance(c, tuple):
                    time.sleep(c[1])
                    continue
                data = c if isinstance(c, str) else "data: " + json.dumps(c) + "\n\n"
                self.wfile.write(data.encode())
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    Canned.chunks, Canned.status, Canned.bodies, Canned.headers_seen = [], 200, [], []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def delta(**d):
    return {"choices": [{"index": 0, "delta": d, "finish_reason": None}]}


def finish(reason):
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": "read a.py"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": {"file_path": "a"}}}]},
            {"role": "tool", "tool_call_id": "toolu_1", "name": "Read", "content": "1\tx = 1"}]


def test_fragmented_tool_calls_text_and_usage(server):
    Canned.chunks = [
        delta(role="assistant", content="I'll "), delta(content="read both."),
        delta(tool_calls=[{"index": 0, "id": "call_a", "type": "function", "function": {"name": "Read", "arguments": ""}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"file_'}}]),
        delta(tool_calls=[{"index": 1, "id": "call_b", "type": "function", "function": {"name": "Gr", "arguments": '{"pat'}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": 'path": "a.py"}'}}]),
        delta(tool_calls=[{"index": 1, "function": {"name": "ep", "arguments": 'tern": "def "}'}}]),
        finish("tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 30,
                                  "prompt_tokens_details": {"cached_tokens": 100}}},
        "data: [DONE]\n\n"]
    eng = OpenAIEngine(server, "m", api_key="sk-test")
    events = list(eng.stream(Request("s", MESSAGES, [], Sampling(temperature=0.2, seed=7, max_tokens=64))))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["I'll ", "read both."]
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.id, c.name, c.arguments, c.error) for c in calls] == [
        ("call_a", "Read", {"file_path": "a.py"}, None), ("call_b", "Grep", {"pattern": "def "}, None)]
    done = events[-1]
    assert isinstance(done, Done) and done.stop_reason == "tool_use" and done.error is None
    u = done.usage
    assert (u.prompt_tokens, u.reused_tokens, u.prefilled_tokens, u.generated_tokens) == (120, 100, 20, 30)
    body = Canned.bodies[0]
    assert body["messages"][2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "Read", "arguments": '{"file_path": "a"}'}}]}
    assert body["messages"][3] == MESSAGES[3]
    assert {k: body[k] for k in ("model", "stream", "temperature", "seed", "max_tokens", "stream_options")} == {
        "model": "m", "stream": True, "temperature": 0.2, "seed": 7, "max_tokens": 64,
        "stream_options": {"include_usage": True}}
    assert Canned.headers_seen[0]["Authorization"] == "Bearer sk-test"


def test_bad_arguments_json_and_length_finish(server):
    Canned.chunks = [delta(tool_calls=[{"index": 0, "id": "c", "function": {"name": "Read", "arguments": '{"file_path": '}}]),
                     finish("length"), "data: [DONE]\n\n"]
    events = list(OpenAIEngine(server, "m").stream(Request("s", MESSAGES)))
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert call.arguments == {} and call.raw == '{"file_path": '
    assert call.error.startswith("tool call arguments are not valid JSON")
    assert events[-1].stop_reason == "max_tokens"


def test_tool_choice_none_is_sent_only_when_asked(server):
    tools = [{"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}}]
    for choice in ("none", "auto"):
        Canned.chunks = [delta(role="assistant", content="ok"), finish("stop"), "data: [DONE]\n\n"]
        list(OpenAIEngine(server, "m").stream(Request("s", MESSAGES, tools, tool_choice=choice)))
    assert Canned.bodies[-2]["tool_choice"] == "none" and "tool_choice" not in Canned.bodies[-1]


def test_http_error_is_one_line(server):
    Canned.status = 404
    events = list(OpenAIEngine(server, "nope").stream(Request("s", MESSAGES)))
    assert len(events) == 1 and events[0].stop_reason == "error"
    assert events[0].error == f"HTTP 404 from {server}/chat/completions: model 'nope' not found second line"


def test_connection_refused_is_an_error_not_a_crash():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (done,) = list(OpenAIEngine(f"http://127.0.0.1:{port}/v1", "m").stream(Request("s", MESSAGES)))
    assert done.stop_reason == "error" and done.error.startswith("ConnectError talking to http://127.0.0.1:")
    assert "\n" not in done.error


def test_cancel_closes_a_stalled_stream(server):
    Canned.chunks = [delta(content="partial"), ("sleep", 20), delta(content="never"), "data: [DONE]\n\n"]
    cancel = threading.Event()
    got, t0 = [], time.monotonic()
    for e in OpenAIEngine(server, "m").stream(Request("s", MESSAGES), cancel=cancel):
        got.append(e)
        if isinstance(e, TextDelta):
            threading.Timer(0.3, cancel.set).start()
    assert time.monotonic() - t0 < 5
    assert [type(e) for e in got] == [TextDelta, Done] and got[-1].stop_reason == "cancelled"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_against_llama_cpp_server(tmp_path, small_gguf_path, llama_cpp_model):
    port = _free_port()
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(small_gguf_path),
                             "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", "4096"], stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-2000:]
            try:
                if httpx.get(base + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        eng = OpenAIEngine(base, "qwen")
        msgs = [{"role": "user", "content": "What is 2 + 3? Answer with just the number."}]
        events = list(eng.stream(Request("s", msgs, [], Sampling(max_tokens=16))))
        done = events[-1]
        assert isinstance(done, Done) and done.error is None, done
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert "5" in text
        assert done.usage.prompt_tokens > 0 and done.usage.generated_tokens > 0
        # Our wire shape for tool history (arguments as JSON strings, tool messages) is accepted.
        events = list(eng.stream(Request("s", MESSAGES + [{"role": "user", "content": "What is x? One word."}],
                                         [], Sampling(max_tokens=8))))
        assert events[-1].stop_reason in ("end_turn", "max_tokens") and events[-1].error is None, events[-1]
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()

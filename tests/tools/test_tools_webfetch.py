"""WebFetch against a real http.server on loopback: Markdown, redirects, caps, errors."""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tools.base import ToolContext, ToolResult
from tools.webfetch import WebFetchTool

PAGE = b"""<html><head><title>T</title><style>p {color: red}</style><script>var x = 1;</script></head>
<body><h1>Release notes</h1><p>Version <b>2.0</b> adds <a href="/docs">docs</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>"""


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send(self, status, body=b"", kind="text/html; charset=utf-8", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        port = self.server.server_address[1]
        routes = {
            "/page": lambda: self.send(200, PAGE),
            "/same": lambda: self.send(301, headers=[("Location", "/page")]),
            "/other": lambda: self.send(302, headers=[("Location", f"http://localhost:{port}/page")]),
            "/loop": lambda: self.send(302, headers=[("Location", "/loop")]),
            "/json": lambda: self.send(200, b'{"a": 1}', "application/json"),
            "/big": lambda: self.send(200, b"y" * 50_000, "text/plain"),
            "/bin": lambda: self.send(200, b"\x00\x01", "application/octet-stream"),
            "/missing": lambda: self.send(404, b"<p>no such page</p>"),
        }
        if self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for _ in range(30):
                self.wfile.write(b"tick\n")
                self.wfile.flush()
                time.sleep(0.1)
            return
        routes.get(self.path, lambda: self.send(404, b"?"))()


@pytest.fixture(scope="module")
def base():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def fetch(url, tool=None, prompt="What is new?") -> ToolResult:
    return (tool or WebFetchTool()).run({"url": url, "prompt": prompt}, ToolContext(cwd=Path(".")))


def test_html_becomes_markdown_with_the_prompt(base):
    result = fetch(f"{base}/page")
    assert result.content == (f"URL: {base}/page\nPrompt: What is new?\n\nContent (Markdown):\n\n"
                              "T\n\n# Release notes\n\nVersion **2.0** adds [docs](/docs).\n\n* one\n* two")
    assert (result.is_error, result.data["status"], result.data["content_type"]) == (False, 200, "text/html")


def test_same_host_redirect_is_followed_and_reported(base):
    result = fetch(f"{base}/same")
    assert result.content.startswith(f"URL: {base}/page\nRedirected: {base}/same -> {base}/page (301)\n")
    assert "# Release notes" in result.content


def test_cross_host_redirect_is_returned_not_followed(base):
    target = base.replace("127.0.0.1", "localhost") + "/page"
    assert fetch(f"{base}/other") == ToolResult(
        f"{base}/other redirected (302) to another host: {target}\nIt was not followed. To fetch it, call WebFetch "
        f"again with url \"{target}\" and the same prompt.", data={"url": f"{base}/other", "redirect": target, "status": 302})


def test_caps_and_errors(base):
    assert fetch(f"{base}/json").content.endswith('Content (Markdown):\n\n{"a": 1}')
    capped = fetch(f"{base}/big", WebFetchTool(max_chars=1000))
    assert capped.content.endswith("y" * 1000 + "\n\n[Content cut at 1,000 characters or 5,000,000 bytes.]")
    assert fetch(f"{base}/bin") == ToolResult(
        f"{base}/bin returned application/octet-stream content (2 bytes), which is not text; WebFetch reads web "
        "pages and text only.", is_error=True, data={"url": f"{base}/bin", "status": 200,
                                                    "content_type": "application/octet-stream", "bytes": 2,
                                                    "redirects": []})
    missing = fetch(f"{base}/missing")
    assert missing.is_error and "HTTP 404 Not Found" in missing.content and "no such page" in missing.content
    assert fetch(f"{base}/loop").content.startswith("Too many redirects (over 5): ")
    assert fetch("ftp://example.com/x") == ToolResult("Not an http(s) URL: 'ftp://example.com/x'.", is_error=True)
    t0 = time.monotonic()
    slow = fetch(f"{base}/slow", WebFetchTool(timeout_s=1))
    assert (slow.is_error, slow.content) == (True, f"Fetching {base}/slow timed out after 1s.")
    assert time.monotonic() - t0 < 2.5
    refused = fetch("http://127.0.0.1:9/")
    assert refused.is_error and refused.content.startswith("Fetching http://127.0.0.1:9/ failed: ConnectError")

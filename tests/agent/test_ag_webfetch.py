"""WebFetch in a session: a new domain is asked for in default mode, "always" stores WebFetch(domain:...), and a
redirect to another host comes back to the model, whose next fetch is checked for that host."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent.core.approval import PermissionAnswer
from agent.engines.scripted import ScriptedEngine
from agent.session.builder import build_session
from agent.session.options import SessionOptions


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{self.server.server_address[1]}/page")
            self.end_headers()
            return
        body = b"<h2>Hello</h2><p>from the page</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def base(tmp_path, monkeypatch):
    for name, value in {"HOME": tmp_path / "home", "AGENT_DATA_DIR": tmp_path / "data",
                        "AGENT_HOME": tmp_path / "agenthome", "CLAUDE_CONFIG_DIR": tmp_path / "claude"}.items():
        monkeypatch.setenv(name, str(value))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def fetch(url: str) -> dict:
    return {"name": "WebFetch", "arguments": {"url": url, "prompt": "What does it say?"}}


def test_domains_are_asked_for_remembered_and_redirects_rechecked(tmp_path, base):
    proj = tmp_path / "proj"
    proj.mkdir()
    page, moved, other = (f"http://127.0.0.1:{base}/page", f"http://127.0.0.1:{base}/moved",
                          f"http://localhost:{base}/page")
    engine = ScriptedEngine([{"tool_calls": [fetch(page)]}, {"tool_calls": [fetch(moved)]},
                             {"tool_calls": [fetch(other)]}, {"text": "It says hello."}])
    core = build_session(SessionOptions(project=proj, engine="scripted"), engine=engine)
    asked = []

    def ask(request):
        asked.append((request.tool_name, request.tool_input["url"], request.rules))
        return PermissionAnswer("always" if len(asked) == 1 else "deny")
    core.ask = ask
    result = core.run("read the page", threading.Event())
    assert result.text == "It says hello."
    # 127.0.0.1 is asked once (then allowed by the stored rule); localhost, reached through a redirect, is asked anew.
    assert asked == [("WebFetch", page, ["WebFetch(domain:127.0.0.1)"]),
                     ("WebFetch", other, ["WebFetch(domain:localhost)"])]
    stored = json.loads((proj / ".agent" / "settings.local.json").read_text())
    assert stored["permissions"]["allow"] == ["WebFetch(domain:127.0.0.1)"]
    results = [m["content"] for m in core.session.messages if m["role"] == "tool"]
    assert "## Hello\n\nfrom the page" in results[0]
    assert results[1].startswith(f"{moved} redirected (302) to another host: {other}\nIt was not followed.")
    assert results[2].startswith("Error: permission to use WebFetch was denied")
    core.close()

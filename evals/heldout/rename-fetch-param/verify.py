EXPECTED = ("GET https://api.example.com/health (timeout 2s)\nGET https://cdn.example.com/ping (timeout 2s)\n"
            "GET https://status.example.com (timeout 5s)\nGET https://upstream.example.com/catalogue (timeout 10s)\n"
            "GET https://upstream.example.com/catalogue (timeout 30s)\n")


def verify(run):
    for name in ("http_client.py", "sync.py", "health.py", "main.py"):
        assert "tmo" not in run.text(name), f"{name} still says tmo"
    r = run.python("-c", "import inspect, http_client; print(inspect.signature(http_client.fetch))")
    assert r.stdout == "(url: str, timeout: float = 5.0) -> str\n", \
        f"fetch's signature is {(r.stdout + r.stderr)[-300:]!r}"
    r = run.python("main.py")
    assert r.returncode == 0 and r.stdout == EXPECTED, f"main.py printed {(r.stdout + r.stderr)[-400:]!r}"

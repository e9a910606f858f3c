def verify(run):
    assert run.text("settings.json") == run.original("settings.json"), "settings.json was changed"
    r = run.python("fetch.py")
    assert r.returncode == 0 and r.stdout == "GET https://example.org/feed (timeout 30s, 2 retries)\n", \
        f"python fetch.py prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("-c", "from fetch import plan; print(plan({'url': 'u', 'timeout': 5, 'retries': 0}))")
    assert r.stdout == "GET u (timeout 5s, 0 retries)\n", f"plan with a timeout gives: {(r.stdout + r.stderr)[-300:]}"

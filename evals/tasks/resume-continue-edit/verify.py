def verify(run):
    assert len(run.results) == 2, "the follow-up prompt did not run"
    assert run.results[0].get("session_id") == run.results[1].get("session_id"), "--continue started a new session"
    r = run.python("-c", "import greet; print(greet.hello())")
    assert r.stdout == "hello there\n", f"hello() gives {(r.stdout + r.stderr)[-200:]!r}"

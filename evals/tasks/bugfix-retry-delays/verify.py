def verify(run):
    assert run.text("test_client.py") == run.original("test_client.py"), "test_client.py was changed"
    r = run.python("-m", "unittest", "-q", "test_client")
    assert r.returncode == 0, f"the tests in test_client.py still fail: {(r.stdout + r.stderr)[-800:]}"
    # The bug is in backoff.delays (one wait too few, starting at 2 * base).
    r = run.python("-c", "from backoff import delays as d; print(d(1, 4), d(3, 2, 5), d(1, 0))")
    assert r.stdout.strip() == "[1, 2, 4, 8] [3, 5] []", f"backoff.delays is still wrong: {(r.stdout + r.stderr)[-400:]}"

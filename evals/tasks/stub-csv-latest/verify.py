def verify(run):
    assert run.text("test_dedupe.py") == run.original("test_dedupe.py"), "test_dedupe.py was changed"
    r = run.pytest("test_dedupe.py")
    assert r.returncode == 0, f"the tests in test_dedupe.py fail: {(r.stdout + r.stderr)[-800:]}"

def verify(run):
    assert run.text("test_mixed.py") == run.original("test_mixed.py"), "test_mixed.py was changed"
    r = run.python("-m", "unittest", "test_mixed")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

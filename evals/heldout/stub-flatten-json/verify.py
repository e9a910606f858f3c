def verify(run):
    assert run.text("test_flatten.py") == run.original("test_flatten.py"), "test_flatten.py was changed"
    r = run.python("-m", "unittest", "test_flatten")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

def verify(run):
    assert run.text("test_links.py") == run.original("test_links.py"), "test_links.py was changed"
    r = run.python("-m", "unittest", "test_links")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

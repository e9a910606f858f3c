def verify(run):
    assert run.text("test_slug.py") == run.original("test_slug.py"), "test_slug.py was changed"
    r = run.pytest("test_slug.py")
    assert r.returncode == 0, f"the tests still fail: {r.stdout[-300:]}"

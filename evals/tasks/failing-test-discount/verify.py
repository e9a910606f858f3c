def verify(run):
    assert run.text("test_pricing.py") == run.original("test_pricing.py"), "test_pricing.py was changed"
    r = run.pytest("test_pricing.py")
    assert r.returncode == 0, f"the tests still fail: {r.stdout[-300:]}"

def verify(run):
    assert run.text("test_quantiles.py") == run.original("test_quantiles.py"), "test_quantiles.py was changed"
    r = run.python("-m", "unittest", "-q", "test_quantiles")
    assert r.returncode == 0, f"the tests in test_quantiles.py fail: {(r.stdout + r.stderr)[-800:]}"

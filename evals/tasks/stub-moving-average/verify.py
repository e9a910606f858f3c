def verify(run):
    assert run.text("test_smooth.py") == run.original("test_smooth.py"), "test_smooth.py was changed"
    r = run.python("-m", "unittest", "-q", "test_smooth")
    assert r.returncode == 0, f"the tests in test_smooth.py fail: {(r.stdout + r.stderr)[-800:]}"

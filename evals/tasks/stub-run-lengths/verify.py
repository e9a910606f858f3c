def verify(run):
    assert run.text("test_runs.py") == run.original("test_runs.py"), "test_runs.py was changed"
    r = run.python("-m", "unittest", "-q", "test_runs")
    assert r.returncode == 0, f"the tests in test_runs.py fail: {(r.stdout + r.stderr)[-800:]}"

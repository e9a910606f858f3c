def verify(run):
    assert run.text("test_durations.py") == run.original("test_durations.py"), "test_durations.py was changed"
    r = run.python("-m", "unittest", "test_durations")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

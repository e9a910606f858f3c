def verify(run):
    assert run.text("test_scheduler.py") == run.original("test_scheduler.py"), "test_scheduler.py was changed"
    r = run.python("-m", "unittest", "test_scheduler")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

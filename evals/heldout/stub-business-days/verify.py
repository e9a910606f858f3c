def verify(run):
    assert run.text("test_workdays.py") == run.original("test_workdays.py"), "test_workdays.py was changed"
    r = run.python("-m", "unittest", "test_workdays")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

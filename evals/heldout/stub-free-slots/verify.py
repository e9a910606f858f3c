def verify(run):
    assert run.text("test_calendar_gaps.py") == run.original("test_calendar_gaps.py"), \
        "test_calendar_gaps.py was changed"
    r = run.python("-m", "unittest", "test_calendar_gaps")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

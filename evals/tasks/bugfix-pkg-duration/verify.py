def verify(run):
    assert run.text("tests/test_durations.py") == run.original("tests/test_durations.py"), "the tests were changed"
    r = run.python("-m", "pytest", "-q", "tests")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-600:]}"

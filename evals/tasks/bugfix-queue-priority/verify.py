def verify(run):
    assert run.text("tests/test_tasks.py") == run.original("tests/test_tasks.py"), "tests/test_tasks.py was changed"
    r = run.python("-m", "pytest", "-q", "tests")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-600:]}"

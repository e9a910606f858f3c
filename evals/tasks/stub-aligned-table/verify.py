def verify(run):
    assert run.text("test_table.py") == run.original("test_table.py"), "test_table.py was changed"
    r = run.python("-m", "unittest", "-q", "test_table")
    assert r.returncode == 0, f"the tests in test_table.py fail: {(r.stdout + r.stderr)[-800:]}"

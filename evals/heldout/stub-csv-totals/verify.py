def verify(run):
    assert run.text("test_sales.py") == run.original("test_sales.py"), "test_sales.py was changed"
    r = run.python("-m", "unittest", "test_sales")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

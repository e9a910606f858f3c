def verify(run):
    assert run.text("test_money.py") == run.original("test_money.py"), "test_money.py was changed"
    r = run.python("-m", "unittest", "test_money")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"

def verify(run):
    assert run.text("test_users.py") == run.original("test_users.py"), "test_users.py was changed"
    r = run.python("-m", "unittest", "-q", "test_users")
    assert r.returncode == 0, f"the tests in test_users.py still fail: {(r.stdout + r.stderr)[-800:]}"
    r = run.python("-c", "from paging import page_slice as p; print(p(list(range(10)), 2, 4), p([1], 1, 5))")
    assert r.stdout.strip() == "[4, 5, 6, 7] [1]", f"paging.page_slice gives: {(r.stdout + r.stderr)[-400:]}"

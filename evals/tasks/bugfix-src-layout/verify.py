def verify(run):
    for name in ("tests/test_wrap.py", "tests/test_case.py"):
        assert run.text(name) == run.original(name), f"{name} was changed"
    r = run.python("-m", "pytest", "-q", "tests")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-800:]}"

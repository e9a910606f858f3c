def verify(run):
    assert run.text("test_hashtags.py") == run.original("test_hashtags.py"), "test_hashtags.py was changed"
    r = run.pytest("test_hashtags.py")
    assert r.returncode == 0, f"the tests in test_hashtags.py fail: {(r.stdout + r.stderr)[-800:]}"

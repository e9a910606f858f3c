def verify(run):
    assert run.text("test_urls.py") == run.original("test_urls.py"), "test_urls.py was changed"
    r = run.python("-m", "unittest", "-q", "test_urls")
    assert r.returncode == 0, f"the tests in test_urls.py fail: {(r.stdout + r.stderr)[-800:]}"

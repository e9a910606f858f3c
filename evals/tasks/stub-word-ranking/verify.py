def verify(run):
    assert run.text("test_wordfreq.py") == run.original("test_wordfreq.py"), "test_wordfreq.py was changed"
    r = run.python("-m", "unittest", "-q", "test_wordfreq")
    assert r.returncode == 0, f"the tests in test_wordfreq.py fail: {(r.stdout + r.stderr)[-800:]}"

def verify(run):
    assert run.text("test_banner.py") == run.original("test_banner.py"), "test_banner.py was changed"
    r = run.python("-m", "unittest", "-q", "test_banner")
    assert r.returncode == 0, f"the tests in test_banner.py still fail: {(r.stdout + r.stderr)[-800:]}"
    # The bug is in wrapping.wrap_words (the line being built at the end was dropped).
    r = run.python("-c", "from wrapping import wrap_words as w; "
                         "print(w('a bb ccc', 4), w('toolongword x', 4), w('one', 10))")
    assert r.stdout.strip() == "['a bb', 'ccc'] ['toolongword', 'x'] ['one']", \
        f"wrapping.wrap_words still drops words: {(r.stdout + r.stderr)[-400:]}"

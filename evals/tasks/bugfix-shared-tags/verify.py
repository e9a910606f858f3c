def verify(run):
    assert run.text("test_plugins.py") == run.original("test_plugins.py"), "test_plugins.py was changed"
    r = run.python("-m", "unittest", "-q", "test_plugins")
    assert r.returncode == 0, f"the tests in test_plugins.py still fail: {(r.stdout + r.stderr)[-800:]}"
    r = run.python("-c", "from plugins import Registry as R; r = R(); r.register('x'); r.register('y', ['t']); "
                   "print(r.register('z'), r.tagged('t'), r.tagged('plugin'))")
    assert r.stdout.strip() == "['plugin'] ['y'] ['x', 'y', 'z']", f"Registry gives: {(r.stdout + r.stderr)[-400:]}"

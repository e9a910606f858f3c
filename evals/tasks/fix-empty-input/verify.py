def verify(run):
    assert run.text("test_durations.py") == run.original("test_durations.py"), "test_durations.py was changed"
    r = run.python("-c", "from durations import parse_duration as p\n"
                         "print(p(''), p('   '), p('2h'))\n"
                         "try:\n    p('soon')\nexcept ValueError:\n    print('raises')")
    assert r.stdout == "0 0 7200\nraises\n", f"parse_duration('' / '   ' / '2h' / 'soon'): {(r.stdout + r.stderr)[-400:]}"
    r = run.python("-m", "pytest", "-q", "test_durations.py")
    assert r.returncode == 0, f"test_durations.py fails: {(r.stdout + r.stderr)[-600:]}"

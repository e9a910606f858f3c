def verify(run):
    assert run.text("test_booking.py") == run.original("test_booking.py"), "test_booking.py was changed"
    r = run.python("-m", "unittest", "test_booking")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-400:]}"
    # The off-by-one is in stay.py: nights() itself must count right, not only price().
    r = run.python("-c", "from stay import nights; print(nights('2023-12-30', '2024-01-02'), nights('2024-03-01', "
                   "'2024-03-01'))")
    assert r.stdout == "3 0\n", f"nights() gave {(r.stdout + r.stderr)[-300:]!r}"

def verify(run):
    assert run.text("tests/test_booking.py") == run.original("tests/test_booking.py"), "tests/test_booking.py was changed"
    assert run.text("tickets/booking.py") == run.original("tickets/booking.py"), "tickets/booking.py was changed"
    r = run.python("-m", "pytest", "-q", "tests")
    assert r.returncode == 0, f"the tests fail: {(r.stdout + r.stderr)[-600:]}"

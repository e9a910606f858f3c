CASES = ["12.5", "12.50", "0.05", "$3.05", "7", "0.29", " 19.9 "]


def verify(run):
    assert run.text("test_orders.py") == run.original("test_orders.py"), "test_orders.py was changed"
    r = run.python("-m", "unittest", "-q", "test_orders")
    assert r.returncode == 0, f"the tests in test_orders.py still fail: {(r.stdout + r.stderr)[-800:]}"
    # The bug is in money.parse_price ("12.5" read as 12 dollars and 5 cents): it must be right on its own.
    r = run.python("-c", f"from money import parse_price, format_cents; "
                         f"print([parse_price(t) for t in {CASES!r}], format_cents(1055), format_cents(5))")
    assert r.stdout.strip() == "[1250, 1250, 5, 305, 700, 29, 1990] 10.55 0.05", \
        f"money.parse_price / format_cents give the wrong cents for {CASES}: {(r.stdout + r.stderr)[-400:]}"

EXPECTED = """\
Mon 08:59 closed
Mon 09:00 open (540 min left)
Fri 17:45 open (15 min left)
Fri 18:00 closed
Sat 13:59 open (1 min left)
Sat 14:00 closed
Sun 12:00 closed
"""

# (moment, open?) beyond the ones hours.py prints: the closing boundary to the second, and the opening one.
CASES = [("2024-03-12 17:59:59", True), ("2024-03-12 18:00:00", False), ("2024-03-12 18:00:01", False),
         ("2024-03-12 09:00:00", True), ("2024-03-12 08:59:59", False), ("2024-03-16 09:59:00", False),
         ("2024-03-16 10:00:00", True), ("2024-03-16 14:00:00", False), ("2024-03-17 10:00:00", False)]


def verify(run):
    r = run.python("hours.py")
    assert r.returncode == 0 and r.stdout == EXPECTED, f"python hours.py prints: {(r.stdout + r.stderr)[-500:]}"
    r = run.python("-c", "import datetime as dt, sys; from shop import is_open, minutes_until_closing; "
                         f"print([is_open(dt.datetime.fromisoformat(t)) for t, _ in {CASES!r}], "
                         "minutes_until_closing(dt.datetime(2024, 3, 12, 16, 30)))")
    want = f"{[ok for _, ok in CASES]} 90"
    assert r.stdout.strip() == want, f"shop.is_open gives {(r.stdout + r.stderr)[-400:]}, expected {want}"

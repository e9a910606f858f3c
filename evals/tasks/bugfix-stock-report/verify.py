EXPECTED = "north: 3 items, 80 units\nsouth: 2 items, 20 units\nTOTAL 100 units\n"


def verify(run):
    for name in ("report.py", "north.csv", "south.csv"):
        assert run.text(name) == run.original(name), f"{name} was changed; the bug is not in it"
    r = run.python("report.py")
    assert r.returncode == 0 and r.stdout == EXPECTED, f"python report.py prints: {(r.stdout + r.stderr)[-400:]}"
    # Each call starts from empty counts, and counts passed in are still added to.
    r = run.python("-c", "from inventory import parse_stock as p; "
                         "print(p(['x,1']), p(['y,2']), p(['x,3', 'z,1'], {'x': 1}), p(['w,5']))")
    assert r.stdout.strip() == "{'x': 1} {'y': 2} {'x': 4, 'z': 1} {'w': 5}", \
        f"inventory.parse_stock still shares counts between calls: {(r.stdout + r.stderr)[-400:]}"

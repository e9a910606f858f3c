EXPECTED = "Top 3 products:\n1. kettle (9)\n2. blender (6)\n3. toaster (6)\n"


def verify(run):
    r = run.python("report.py")
    assert r.returncode == 0 and r.stdout == EXPECTED, f"report.py printed {(r.stdout + r.stderr)[-300:]!r}"
    assert run.text("orders.txt") == run.original("orders.txt"), "orders.txt was changed"
    # Fixed in stats.py, where the bug is: top_n itself ranks highest first.
    r = run.python("-c", "from stats import top_n; print(top_n({'a': 2, 'b': 5, 'c': 2, 'd': 1}, 3))")
    assert r.stdout == "[('b', 5), ('a', 2), ('c', 2)]\n", f"top_n gave {(r.stdout + r.stderr)[-300:]!r}"

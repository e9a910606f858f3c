def verify(run):
    before, after = run.original("inventory.py").splitlines(), run.text("inventory.py").splitlines()
    assert len(after) == len(before), f"inventory.py has {len(after)} lines, not {len(before)}"
    changed = [(i + 1, a) for i, (b, a) in enumerate(zip(before, after)) if a != b]
    assert len(changed) == 1 and changed[0][1] == "    return item.stock < 2", f"changed lines: {changed[:5]}"

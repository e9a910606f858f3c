def verify(run):
    assert run.text("tests/test_account.py") == run.original("tests/test_account.py"), "tests/test_account.py was changed"
    r = run.python("-m", "unittest", "discover", "-s", "tests", "-t", ".", "-q")
    assert r.returncode == 0, f"the tests in tests/test_account.py still fail: {(r.stdout + r.stderr)[-800:]}"
    # The limit itself, beyond the tests: exactly -overdraft is allowed, one cent more is not.
    r = run.python("-c", """
from account import Account, InsufficientFunds
out = []
for balance, overdraft, amount in [(0, 25, 25), (0, 25, 25.01), (10, 0, 10), (10, 0, 11), (-5, 20, 15), (-5, 20, 16)]:
    acc = Account("x", balance, overdraft)
    try:
        acc.withdraw(amount)
        out.append(acc.balance)
    except InsufficientFunds:
        out.append("refused")
print(out)
""")
    assert r.stdout.strip() == "[-25, 'refused', 0, 'refused', -20, 'refused']", \
        f"Account.withdraw applies the overdraft wrongly: {(r.stdout + r.stderr)[-400:]}"

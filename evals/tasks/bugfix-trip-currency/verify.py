EXPECTED = """\
flight                  310.00 EUR =    310.00 EUR
hotel                   540.00 CHF =    561.60 EUR
train                    89.60 CHF =     93.18 EUR
dinner with client      124.50 USD =    114.54 EUR
souvenirs              2400.00 JPY =     14.88 EUR
Total: 1,094.20 EUR
"""


def verify(run):
    r = run.python("main.py")
    assert r.returncode == 0 and r.stdout == EXPECTED, f"python main.py prints: {(r.stdout + r.stderr)[-600:]}"
    # The bug is in money.to_eur; from_eur was right and must stay right.
    r = run.python("-c", "from money import to_eur, from_eur; "
                         "print(to_eur(100, 'GBP'), to_eur(50, 'USD'), to_eur(7, 'EUR'), "
                         "from_eur(117, 'GBP'), from_eur(92, 'USD'), from_eur(62, 'JPY'))")
    assert r.stdout.strip() == "117.0 46.0 7.0 100.0 100.0 10000.0", \
        f"money.to_eur / from_eur convert wrongly: {(r.stdout + r.stderr)[-400:]}"

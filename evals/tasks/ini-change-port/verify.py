import configparser


def verify(run):
    cfg = configparser.ConfigParser()
    cfg.read_string(run.text("app.ini"))
    got = {s: dict(cfg[s]) for s in cfg.sections()}
    assert got == {"server": {"host": "0.0.0.0", "port": "9090"}, "metrics": {"port": "9100"}}, f"app.ini is {got}"

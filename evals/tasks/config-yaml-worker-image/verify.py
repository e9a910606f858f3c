import yaml


def verify(run):
    try:
        data = yaml.safe_load(run.text("compose.yaml"))
    except yaml.YAMLError as e:
        raise AssertionError(f"compose.yaml is not valid YAML any more: {e}".splitlines()[0])
    expected = yaml.safe_load(run.original("compose.yaml"))
    expected["services"]["worker"]["image"] = "registry.example.com/shop/web:2.8.0-rc1"
    got = data.get("services", {}) if isinstance(data, dict) else data
    assert got.get("worker", {}).get("image") == expected["services"]["worker"]["image"], \
        f"the worker's image is {got.get('worker', {}).get('image')!r}"
    assert data == expected, "other settings changed too"
    assert run.text("compose.yaml").startswith("# Local stack"), "the leading comment is gone"

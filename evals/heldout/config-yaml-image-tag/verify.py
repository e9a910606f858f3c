import yaml


def verify(run):
    try:
        data = yaml.safe_load(run.text("compose.yaml"))
    except yaml.YAMLError as e:
        raise AssertionError(f"compose.yaml is not valid YAML: {str(e).splitlines()[0]}")
    expected = yaml.safe_load(run.original("compose.yaml"))
    expected["services"]["web"]["image"] = "registry.example.com/shop/web:1.5.0"
    assert data == expected, f"compose.yaml is {data}"

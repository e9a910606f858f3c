import yaml


def verify(run):
    try:
        data = yaml.safe_load(run.text("deploy.yaml"))
    except yaml.YAMLError as e:
        raise AssertionError(f"deploy.yaml is not valid YAML: {e}")
    expected = yaml.safe_load(run.original("deploy.yaml"))
    expected["replicas"] = 5
    assert data == expected, f"deploy.yaml is {data}"

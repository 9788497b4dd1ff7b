"""The Molecule scenarios' platforms: each scenario's instances as Molecule resolves them (the base
config .config/molecule/config.yml, then the scenario's molecule.yml over it), and no platform
block written out twice in one file (the repeats merge the first one with `<<: *instance`)."""
from __future__ import annotations

import os

import pytest
import yaml
from molecule import interpolation, util

from conftest import ROOT

BASE = ROOT / ".config" / "molecule" / "config.yml"
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))
# What each scenario needs: its instances in order (multinode's rank 0 is the first), as
# (container name, hostname, inventory groups). The rest of every instance is the base config's.
ONE = [("sglang-molecule-{name}", "ct-molecule", ["sglang_servers"])]
EXPECTED = {
    "brownfield": ONE,
    "deploy_rollback": ONE,
    "engine_switch": ONE,
    "sglang": ONE,
    "fleet_canary": [("sglang-molecule-canary-%d" % i, "ct-canary-%d" % i, ["sglang_servers"])
                     for i in (1, 2, 3)],
    "multinode": [("sglang-molecule-mn-rank%d" % i, "ct-mn-rank%d" % i, ["sglang_servers", "qwen_pair"])
                  for i in (0, 1)],
    "nvidia_gpu": [("sglang-molecule-nvidia_gpu", "ct-molecule", ["sglang_servers", "gpu_fresh"]),
                   ("sglang-molecule-nvidia_gpu-existing", "ct-molecule-existing",
                    ["sglang_servers", "gpu_existing"])],
}
OWN = ("name", "hostname", "groups", "image")
# The scenarios that test a fresh host start from the bare image; the others from the deploy image
# (scripts/podman-setup.sh: the apt packages every deploy installs already there).
BARE = {"sglang", "nvidia_gpu"}
IMAGES = {True: "localhost/sglang-deploy/debian12-systemd:latest",
          False: "localhost/sglang-deploy/debian12-systemd-deploy:latest"}


def resolved(name):
    """The scenario's config as Molecule 26 builds it (molecule.config.Config._combine): each file's
    text interpolated with the environment, parsed, and merged over the ones before it."""
    env = dict(os.environ, MOLECULE_SCENARIO_NAME=name, MOLECULE_PROJECT_DIRECTORY=str(ROOT))
    interpolator = interpolation.Interpolator(interpolation.TemplateWithDefaults, env)
    config = {}
    for path in (BASE, ROOT / "molecule" / name / "molecule.yml"):
        config = util.merge_dicts(config, util.safe_load(interpolator.interpolate(path.read_text()), path))
    return config


def _canonical(node):
    if isinstance(node, yaml.ScalarNode):
        return node.tag, node.value
    if isinstance(node, yaml.SequenceNode):
        return tuple(_canonical(n) for n in node.value)
    return tuple(sorted(((_canonical(k), _canonical(v)) for k, v in node.value), key=repr))


def pasted_settings(text):
    """Settings (key: value) written out in more than one platform mapping of one YAML text, before
    merge keys are resolved: what a pasted platform block repeats."""
    root = yaml.compose(text)
    platforms = [v for k, v in (root.value if isinstance(root, yaml.MappingNode) else [])
                 if k.value == "platforms"]
    seen, pasted = {}, set()
    for mapping in (platforms[0].value if platforms else []):
        for key, value in mapping.value:
            if key.value == "<<":
                continue
            setting = (key.value, _canonical(value))
            if seen.get(setting, mapping) is not mapping:
                pasted.add(key.value)
            seen.setdefault(setting, mapping)
    return sorted(pasted)


PASTED = """
platforms:
  - name: a-1
    hostname: ct-1
    image: img
    capabilities: [SYS_ADMIN]
  - name: a-2
    hostname: ct-2
    image: img
    capabilities: [SYS_ADMIN]
"""
MERGED = """
platforms:
  - &instance
    name: a-1
    hostname: ct-1
    image: img
    capabilities: [SYS_ADMIN]
  - <<: *instance
    name: a-2
    hostname: ct-2
"""


def test_the_rule_catches_a_pasted_platform_and_passes_a_merged_one():
    assert pasted_settings(PASTED) == ["capabilities", "image"]
    assert pasted_settings(MERGED) == []
    assert yaml.safe_load(MERGED) == yaml.safe_load(PASTED)


@pytest.mark.parametrize("path", [BASE] + [ROOT / "molecule" / n / "molecule.yml" for n in SCENARIOS],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_platform_block_is_pasted_twice(path):
    assert pasted_settings(path.read_text()) == [], (
        "%s: these platform settings are written out in more than one instance; write the first "
        "instance once with an anchor (- &instance) and merge it in the others (- <<: *instance), "
        "giving only what differs" % path.relative_to(ROOT))


def test_every_scenario_has_its_expected_platforms():
    assert set(EXPECTED) == set(SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_resolved_platforms_are_the_base_container_under_the_scenarios_names(name):
    base = yaml.safe_load(BASE.read_text())["platforms"]
    assert len(base) == 1
    shared = {k: v for k, v in base[0].items() if k not in OWN}
    config = resolved(name)
    platforms = config["platforms"]
    assert [(p["name"], p["hostname"], p["groups"]) for p in platforms] == [
        (n.format(name=name), h, g) for n, h, g in EXPECTED[name]]
    for platform in platforms:
        assert {k: v for k, v in platform.items() if k not in OWN} == shared, platform["name"]
        assert platform["image"] == IMAGES[name in BARE], platform["name"]
    # testinfra runs against the first instance
    assert config["verifier"]["options"]["hosts"] == platforms[0]["name"]


def test_container_names_are_unique_across_scenarios():
    """The scenarios run side by side (scripts/molecule_run.py): no two share a container."""
    names = [p["name"] for n in SCENARIOS for p in resolved(n)["platforms"]]
    assert len(names) == len(set(names))


def test_multinode_hosts_form_the_deployment_of_the_group_they_are_in():
    config = resolved("multinode")
    assert config["provisioner"]["connection_options"]["sglang_multinode_group"] == "qwen_pair"
    assert all("qwen_pair" in p["groups"] for p in config["platforms"])

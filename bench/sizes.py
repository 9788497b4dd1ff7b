"""The model and hardware size figures for the roofline: a host's, as the planner reads its
variables, or the user's own files.

    model, hardware = of_host(host)                # a planner Host (bench/planner.py)
    model, hardware = default()                    # the production inventory's server
    model, hardware = load_sizes(["a.yml", "b.yml"])

A host's figures are its ``sglang_model_size`` and ``sglang_hardware`` as a play on it sees them
(role defaults, group_vars, host_vars, templated). Without a host the default is the production
inventory's server (the first host of its sglang_servers group), read the same way.

A size file (``--sizes``) is the user's: read as raw YAML (no Jinja, no Ansible precedence beyond
"later files override earlier ones"), holding ``sglang_model_size`` and/or ``sglang_hardware``
(the inventory's names) or ``model`` and/or ``hardware`` (a small stand-alone sizes file). A later
file's dict replaces an earlier one's as a whole, as Ansible's default ``hash_behaviour=replace``
does, and a later ``null`` unsets it. Every problem raises ValueError naming the file; a
stdlib-only Python (no PyYAML) raises NoYAML.
"""
from __future__ import annotations

from pathlib import Path

try:
    import yaml
except ImportError:  # stdlib-only Python: load_file raises NoYAML
    yaml = None

from sglang_perf.plan.capacity import HARDWARE_KEYS, MODEL_KEYS

from bench.paths import PRODUCTION


class NoYAML(ValueError):
    """The sizes cannot be read: PyYAML is missing (a stdlib-only Python)."""


# what -> (accepted top-level keys, the figures capacity.py knows)
SECTIONS = {
    "model": (("sglang_model_size", "model"), MODEL_KEYS),
    "hardware": (("sglang_hardware", "hardware"), HARDWARE_KEYS),
}


def _figures(path, key, value, known):
    if not isinstance(value, dict):
        raise ValueError("%s: %s must be a mapping of numbers (%s), got %r"
                         % (path, key, ", ".join(known), value))
    out = {}
    for name, v in value.items():
        if name not in known:
            raise ValueError("%s: %s.%s is not a size figure (known: %s)"
                             % (path, key, name, ", ".join(known)))
        if v is None:
            continue
        if isinstance(v, str) and ("{{" in v or "{%" in v):
            raise ValueError("%s: %s.%s is a Jinja template (%r); sizes are read as raw YAML, "
                             "write the number" % (path, key, name, v))
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError("%s: %s.%s must be a number, got %r" % (path, key, name, v))
        out[name] = v
    return out


def load_file(path):
    """{"model": dict or None, "hardware": dict or None} for the sections ``path`` sets
    (a key absent from the file is absent from the result)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError("%s: size file not found" % path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError("%s: cannot read: %s" % (path, e))
    if yaml is None:
        raise NoYAML("%s: PyYAML is not installed (the repo's venv has it; or pass --no-roofline)"
                     % path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError("%s: not valid YAML: %s" % (path, " ".join(str(e).split())))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("%s: expected a YAML mapping at the top level, got %s"
                         % (path, type(data).__name__))
    found = {}
    for what, (keys, known) in SECTIONS.items():
        present = [k for k in keys if k in data]
        if len(present) > 1:
            raise ValueError("%s: sets both %s; keep one" % (path, " and ".join(present)))
        if present:
            value = data[present[0]]
            found[what] = None if value is None else _figures(path, present[0], value, known)
    return found


def from_vars(variables, where):
    """(model, hardware) from a host's variables (``sglang_model_size``, ``sglang_hardware``, as
    the planner gives them); ValueError naming ``where`` when one is missing or wrong."""
    found = []
    for keys, known in SECTIONS.values():
        value = variables.get(keys[0])
        if not value:
            raise ValueError("%s sets no %s" % (where, keys[0]))
        found.append(_figures(where, keys[0], value, known))
    return tuple(found)


def of_host(host):
    """(model, hardware) of a planner Host (its checked inputs); ValueError naming the host."""
    return from_vars(host.values(), host.where)


def default():
    """(model, hardware) of the production inventory's server, through the planner (Ansible's:
    ImportError under a stdlib-only Python); ValueError naming what is missing. Its vault is
    skipped without a note: the sizes are never secret, and a command that names no host has no
    vault password to give."""
    from bench import planner
    hosts = planner.hosts_of(PRODUCTION)
    if not hosts:
        raise ValueError("the inventory %s has no host in %s" % (PRODUCTION, planner.PLAY_GROUP))
    return of_host(planner.host_for(PRODUCTION, hosts[0], note=lambda text: None))


def load_sizes(paths):
    """(model, hardware) from the files ``paths``, later files overriding earlier ones. Raises
    ValueError naming the file on a missing file, a templated or non-numeric value, or when no
    file sets one of the two."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("no size file given")
    merged = {"model": None, "hardware": None}
    for path in paths:
        merged.update(load_file(path))
    for what, (keys, _known) in SECTIONS.items():
        if not merged[what]:
            raise ValueError("no size file sets %s (or %s): read %s"
                             % (keys[0], keys[1], ", ".join(str(p) for p in paths)))
    return merged["model"], merged["hardware"]

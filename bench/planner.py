"""The one planner on the controller: a host's variables through Ansible's own inventory, variable
manager and loader, its roles' inputs checked against their argument specs, and its deploy plan
(``sglang_perf/plan/deploy.py make``). Every caller plans here: the ``sglang_deploy_plan`` action
(with the play's task variables), ``bench gate/run/calibrate/compare/tune`` and the tests (with an
inventory, a host and extra variables, as ``ansible-playbook -i INVENTORY -e @FILE`` would).

    plan = plan_for(inventory, host, extra_vars)        # the plan of one host
    host = host_for(inventory, host, vars_files=...)    # its variables, inputs and plans of variants
    host.plan(sglang_profile="x")                       # the plan with inputs overridden

Layers, as a task of a play on the host sees them: role defaults < the inventory's group_vars and
host_vars < a play's vars files < each --vars file (as ``-e @FILE``) < extra variables. Without an
inventory the host stands alone (role defaults, then the files). Vaulted files are skipped with a
note on stderr unless a vault password file is given."""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import get_file_vault_secret, is_encrypted_file
from ansible.plugins.vars import host_group_vars
from ansible.template import Templar
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager
from sglang_perf.plan import deploy as deploy_plan

from bench.common import PlanError
from bench.paths import ROOT

# where the playbooks are: a relative path in a play's vars resolves from here
PLAYBOOKS = ROOT / "playbooks"
# Inputs of the playbooks (playbooks/vars/rollout.yml) the plan checks when the play has them.
PLAY_INPUTS = ("sglang_rollout_canary", "sglang_rollout_batch")
# Role data the plan reads besides the argument specs' options (roles/*/vars/main.yml; the rest
# of those files is there for the defaults that derive from it).
ROLE_DATA = ("_nvidia_gpu_repo_distros", "_sglang_min_driver_by_cuda")
# the roles whose inputs a measurement plans with (a unit rendered for review: nothing installed)
MEASURED_ROLES = ("sglang", "sglang_gate")
# The secret a measurement may not be able to read (its vault skipped): the host has one, which
# is what the plan needs (whether a key is set, never the key); the request's key is the caller's.
SECRET = "sglang_api_key"
UNREAD = "vaulted-and-not-read-by-this-run"


# ------------------------------------------------------------------------- the variables ------
class _Loader(DataLoader):
    """Ansible's loader that, without vault secrets, skips a vaulted file (one note each)."""

    def __init__(self, note=None):
        super().__init__()
        self._note, self._skipped = note or (lambda text: sys.stderr.write(text)), set()

    def load_from_file(self, file_name, *args, **kwargs):
        path = self.path_dwim(file_name)
        if not self._vault.secrets and Path(path).is_file():
            with open(path, "rb") as fh:
                vaulted = is_encrypted_file(fh)
            if vaulted:
                if path not in self._skipped:
                    self._skipped.add(path)
                    self._note("%s: vaulted, skipped (give --vault-password-file FILE to read it)\n" % path)
                return {}
        return super().load_from_file(file_name, *args, **kwargs)


def loader(vault_password_file=None, basedir=PLAYBOOKS, note=None):
    """A DataLoader based in ``basedir``, decrypting with ``vault_password_file`` when given."""
    dl = _Loader(note)
    dl.set_basedir(str(basedir))
    if vault_password_file:
        try:
            secret = get_file_vault_secret(filename=str(vault_password_file), loader=dl)
            secret.load()
        except AnsibleError as e:
            raise PlanError("--vault-password-file %s: %s" % (vault_password_file, e.message))
        dl.set_vault_secrets([("default", secret)])
    return dl


def files_of(path):
    """``path``'s YAML files: itself, or a vars directory's *.yml/*.yaml; a relative path is the
    user's, from the current directory (never the loader's base, playbooks/)."""
    path = Path(path).absolute()
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml", ".json"))
    if not path.is_file():
        raise PlanError("no vars file %s" % path)
    return [path]


def load(dl, path):
    """The variables of the vars file ``path``, loaded as Ansible loads one (templates trusted)."""
    try:
        data = dl.load_from_file(str(path), trusted_as_template=True) or {}
    except AnsibleError as e:
        raise PlanError("cannot read %s: %s" % (path, e.message))
    if not isinstance(data, dict):
        raise PlanError("%s is not a mapping of variables" % path)
    return data


def role_dir(name):
    for d in C.DEFAULT_ROLES_PATH:
        path = os.path.join(d, name)
        if os.path.isdir(path):
            return path
    raise AnsibleError("sglang_deploy_plan: role %s is not in the roles path (%s)"
                       % (name, ", ".join(C.DEFAULT_ROLES_PATH)))


def task_vars(inventory, host, play_vars_files=(), vars_files=(), extra=None, dl=None,
              vault_password_file=None):
    """(loader, variables) of ``host`` of ``inventory`` (a file or a directory, as `-i`; None: a
    host of no inventory) as a task of a play on it sees them, role defaults aside: group_vars,
    host_vars < play vars files < each of ``vars_files`` (files or directories) < ``extra``.
    Raises PlanError naming what is wrong."""
    if inventory is not None and not Path(inventory).exists():
        raise PlanError("no inventory %s" % inventory)
    dl = dl or loader(vault_password_file)
    host_group_vars.FOUND.clear()  # the plugin's per-process cache of vars files: this load's files
    if inventory is None:
        inv = InventoryManager(loader=dl, parse=False)
        inv.add_host(host, group="all")
    else:
        inv = InventoryManager(loader=dl, sources=[str(inventory)])
    entity = inv.get_host(host)
    if entity is None:
        hosts = sorted(h.name for h in inv.get_hosts("all"))
        raise PlanError("no host %s in the inventory %s (its hosts: %s)"
                        % (host, inventory, ", ".join(hosts) or "none"))
    manager = VariableManager(loader=dl, inventory=inv)
    manager._hostvars = HostVars(inventory=inv, variable_manager=manager, loader=dl)  # as a run sets it
    on_top = {}
    for path in vars_files:
        for f in files_of(path):
            on_top.update(load(dl, f))
    on_top.update(dl.load(json.dumps(extra or {})))
    manager._extra_vars = on_top
    try:
        variables = manager.get_vars(host=entity, include_hostvars=True)
    except AnsibleError as e:
        raise PlanError("%s in %s: %s" % (host, inventory, e.message))
    for f in play_vars_files:
        variables.update(load(dl, f))
    variables.update(manager.extra_vars)
    return dl, variables


# ---------------------------------------------------------------------------- the inputs ------
def _load_role_file(dl, path):
    if not os.path.exists(path):
        return {}
    return dl.load_from_file(path, trusted_as_template=True) or {}


def inputs(dl, templar, variables, roles):
    """(values, problems): every role input of ``roles`` as the play sees it - role defaults under
    the play's variables - templated and checked against the roles' argument specs (converted to
    their types), plus the role data and the play inputs the plan reads."""
    dirs = {r: role_dir(r) for r in roles}
    layers = {}
    for r in roles:
        layers.update(_load_role_file(dl, os.path.join(dirs[r], "defaults", "main.yml")))
    for r in roles:  # derived names and role data (inputs come from the play)
        layers.update(_load_role_file(dl, os.path.join(dirs[r], "vars", "main.yml")))
    layers.update(variables)
    specs = {}
    for r in roles:
        path = os.path.join(dirs[r], "meta", "argument_specs.yml")
        spec = _load_role_file(dl, path).get("argument_specs") or {}
        # the plan is what is being made here: the roles that read it declare it, nobody sets it
        options = spec.get("main", {}).get("options", {})
        specs[r] = {k: o for k, o in options.items() if k != "sglang_deploy_plan"}
    problems, values = [], {}

    def render(names, role):
        engine = templar.copy_with_new_env(available_variables=dict(layers, role_path=dirs[role]))
        for name in names:
            if name in values or name not in layers:
                continue
            try:
                values[name] = engine.template(layers[name])
            except AnsibleError as e:
                problems.append("%s: %s" % (name, e.message))

    for r in roles:
        render(list(specs[r]) + [k for k in ROLE_DATA if k.startswith("_%s_" % r)], r)
    render(PLAY_INPUTS, roles[-1])
    for r in roles:
        given = {k: values[k] for k in specs[r] if k in values}
        checked = ArgumentSpecValidator(specs[r]).validate(given, validate_role_argument_spec=True)
        problems.extend("%s: %s" % (r, m) for m in checked.error_messages)
        converted = checked.validated_parameters
        values.update({k: converted[k] for k in given if k in converted})
    return values, problems


# ------------------------------------------------------------------------------ the plan ------
def _sha256(path):
    """A file's sha256 on the controller, None when it is not there."""
    if not os.path.isfile(path):
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_lock(path):
    """A lock file's text as Ansible's file lookup reads it; None when there is no such file."""
    if not isinstance(path, str) or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read().rstrip()


def plan_values(values, variables, roles=deploy_plan.ROLES, review=False):
    """The plan of checked role inputs ``values`` (inputs()'s) on the host whose variables are
    ``variables``."""
    return deploy_plan.make(values, variables.get("inventory_hostname"), variables.get("groups", {}),
                            variables.get("hostvars", {}), variables.get("ansible_play_hosts_all"),
                            variables.get("ansible_facts", {}), read_lock=_read_lock, wheel_digest=_sha256,
                            review=review, roles=list(roles),
                            locks_dir=os.path.join(role_dir("sglang"), "files", "locks"))


def plan_host(dl, templar, variables, roles=deploy_plan.ROLES, review=False):
    """The plan of the host whose variables are ``variables`` (a task's, as the action has them)."""
    roles = list(roles)
    values, problems = inputs(dl, templar, variables, roles)
    if problems:  # types are wrong: the value checks would only repeat them
        return {"host": variables.get("inventory_hostname"), "problems": problems, "roles": roles}
    return plan_values(values, variables, roles, review)


class Host(object):
    """One host's variables as a play on it sees them, its roles' checked inputs, and its plans."""

    def __init__(self, dl, variables, roles, where):
        self.dl, self.vars, self.roles, self.where = dl, variables, tuple(roles), where
        self._values = None

    @property
    def name(self):
        return self.vars.get("inventory_hostname")

    def values(self):
        """The roles' inputs, templated and checked against their argument specs (once). A
        sglang_api_key this run cannot template (a vault it skipped) stands as UNREAD."""
        if self._values is None:
            values, problems = self._inputs(self.vars)
            if problems and all(p.startswith(SECRET + ":") for p in problems):
                self.vars = dict(self.vars, **{SECRET: UNREAD})
                values, problems = self._inputs(self.vars)
            if problems:
                raise PlanError("%s: %s" % (self.where, "; ".join(problems)))
            self._values = values
        return self._values

    def _inputs(self, variables):
        return inputs(self.dl, Templar(loader=self.dl, variables=variables), variables, list(self.roles))

    def api_key(self):
        """The host's sglang_api_key where this run can read it, else None."""
        key = self.values().get(SECRET)
        return None if key in (UNREAD, "") else key

    def plan(self, review=True, **overrides):
        """The plan of the host's inputs with ``overrides`` (checked inputs) on top."""
        return plan_values(dict(self.values(), **overrides), self.vars, self.roles, review)

    def planned(self, review=True, **overrides):
        """plan() that must have no problems: PlanError naming them."""
        p = self.plan(review, **overrides)
        if p["problems"]:
            raise PlanError("the plan of %s: %s" % (self.where, "; ".join(p["problems"])))
        return p

    def template(self, name, default=None):
        """A variable of the host as Ansible templates it (e.g. sglang_api_key, ansible_host);
        ``default`` when it is not set or cannot be templated (a skipped vault)."""
        if name not in self.vars:
            return default
        try:
            return Templar(loader=self.dl, variables=self.vars).template(self.vars[name])
        except AnsibleError:
            return default

    def url(self):
        """Where the controller reaches the host's server: ansible_host (else the inventory name)
        at sglang_port, as the deploy's readiness check asks it on the host (plain HTTP)."""
        host = self.template("ansible_host") or self.name
        if ":" in str(host):
            host = "[%s]" % host
        return "http://%s:%s" % (host, self.values().get("sglang_port"))


# Secrets a file of inputs never holds: the API key stands as UNREAD where one is set (the plan
# needs only that), the hub token as '' (nothing the plan decides reads it).
SECRETS = {SECRET: UNREAD, "sglang_hf_token": ""}


def shareable(values):
    """Checked inputs as a file may hold them: plain data (JSON's), no secret (SECRETS)."""
    out = json.loads(json.dumps(values, default=str))
    out.update({k: hidden for k, hidden in SECRETS.items() if out.get(k)})
    return out


def host_of_inputs(values, name, roles=MEASURED_ROLES, extra=None):
    """The Host ``name`` of checked inputs ``values`` (shareable()'s, as the play's planner wrote
    them: playbooks/tasks/tune_host.yml) with ``extra`` checked inputs on top: a single node, no
    inventory read again. PlanError names a multi-node host (its peers' variables are not here)."""
    if not isinstance(values, dict) or not values:
        raise PlanError("the inputs of host %s are not a mapping of the roles' inputs" % name)
    if values.get("sglang_multinode_group"):
        raise PlanError("host %s serves with other nodes (sglang_multinode_group %s): its inputs alone "
                        "cannot plan it" % (name, values["sglang_multinode_group"]))
    host = Host(None, {"inventory_hostname": name}, roles, "host %s (the play's checked inputs)" % name)
    host._values = dict(values, **(extra or {}))
    return host


def read_inputs(path, name, roles=MEASURED_ROLES, extra=None):
    """host_of_inputs of the JSON file ``path`` (a command's --inputs); PlanError names a file
    that cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError) as e:
        raise PlanError("--inputs %s cannot be read: %s" % (path, e))
    return host_of_inputs(values, name, roles, extra)


# the group the deploy's plays run on (deploy.yml): plan_for, the preflight without a play, has its
# hosts as the play's
PLAY_GROUP = "sglang_servers"


def hosts_of(inventory, group=PLAY_GROUP):
    """The names of ``group``'s hosts in ``inventory``, in the inventory's order."""
    if not Path(inventory).exists():
        raise PlanError("no inventory %s" % inventory)
    inv = InventoryManager(loader=loader(), sources=[str(inventory)])
    return [h.name for h in inv.get_hosts(group)]


def host_for(inventory, host, extra_vars=None, vars_files=(), play_vars_files=(), roles=MEASURED_ROLES,
             vault_password_file=None, facts=None, play_hosts=None, note=None):
    """The Host ``host`` of ``inventory`` (None: a host of no inventory, named ``host``) with
    ``vars_files`` and ``extra_vars`` on top, as a task of a play on ``play_hosts`` (None: of no
    play) sees it; ``note(text)`` is told each vaulted file skipped (default: stderr). PlanError
    names what cannot be read."""
    dl, variables = task_vars(inventory, host, play_vars_files, vars_files, extra_vars,
                              dl=loader(vault_password_file, note=note))
    if inventory is None:  # what the role defaults template from
        variables.setdefault("inventory_dir", str(ROOT / "out"))
    if facts is not None:
        variables["ansible_facts"] = dict(facts)
    if play_hosts is not None:
        variables["ansible_play_hosts_all"] = list(play_hosts)
    where = "host %s of %s" % (host, inventory) if inventory is not None else "host %s" % host
    return Host(dl, variables, roles, where)


def plan_for(inventory, host, extra_vars=None, roles=deploy_plan.ROLES, review=False, play_hosts=None, **kw):
    """The deploy plan of ``host`` of ``inventory`` as the preflight sets it (its ``problems``
    listed, not raised), ``extra_vars`` as ``-e``, in a play on ``play_hosts`` (default: the
    inventory's PLAY_GROUP, as deploy.yml's); ``kw`` as host_for's."""
    h = host_for(inventory, host, extra_vars, roles=roles, play_hosts=play_hosts, **kw)
    if play_hosts is None:
        h.vars["ansible_play_hosts_all"] = list(h.vars.get("groups", {}).get(PLAY_GROUP, []))
    return plan_host(h.dl, Templar(loader=h.dl, variables=h.vars), h.vars, roles, review)

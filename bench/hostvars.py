"""A host's variables as ansible-playbook sees them, from Ansible's own inventory, variable manager
and loader: the deploy roles' defaults underneath, the inventory's group_vars and host_vars, a
play's vars files, then the --vars files and extra variables on top (as `-e @FILE`, `-e JSON`).
Vaulted files are skipped with a note on stderr unless a vault password file is given."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import get_file_vault_secret, is_encrypted_file
from ansible.plugins.vars import host_group_vars
from ansible.template import Templar
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager
from sglang_perf.deploy_plan import ROLES  # the deploy's roles, whose defaults lie under the inventory

from bench.paths import ROOT

# where the playbooks are: a relative path in a play's vars resolves from here
PLAYBOOKS = ROOT / "playbooks"


class HostVarsError(ValueError):
    pass


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
            raise HostVarsError("--vault-password-file %s: %s" % (vault_password_file, e.message))
        dl.set_vault_secrets([("default", secret)])
    return dl


def files_of(path):
    """``path``'s YAML files: itself, or a vars directory's *.yml/*.yaml; a relative path is the
    user's, from the current directory (never the loader's base, playbooks/)."""
    path = Path(path).absolute()
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml", ".json"))
    if not path.is_file():
        raise HostVarsError("no vars file %s" % path)
    return [path]


def load(dl, path):
    """The variables of the vars file ``path``, loaded as Ansible loads one (templates trusted)."""
    try:
        data = dl.load_from_file(str(path), trusted_as_template=True) or {}
    except AnsibleError as e:
        raise HostVarsError("cannot read %s: %s" % (path, e.message))
    if not isinstance(data, dict):
        raise HostVarsError("%s is not a mapping of variables" % path)
    return data


def role_defaults(dl, roles=ROLES):
    """The defaults of ``roles``, later roles over earlier ones (as a play's role list layers them)."""
    out = {}
    for role in roles:
        out.update(load(dl, ROOT / "roles" / role / "defaults" / "main.yml"))
    return out


def task_vars(inventory, host, roles=ROLES, play_vars_files=(), vars_files=(), extra=None,
              vault_password_file=None, dl=None):
    """(loader, variables) of ``host`` of ``inventory`` (a file or a directory, as `-i`) as a task
    of a play on it sees them: role defaults < group_vars, host_vars < play vars files < each of
    ``vars_files`` (files or directories) < ``extra``. Raises HostVarsError naming what is wrong."""
    if not Path(inventory).exists():
        raise HostVarsError("no inventory %s" % inventory)
    dl = dl or loader(vault_password_file)
    host_group_vars.FOUND.clear()  # the plugin's per-process cache of vars files: this load's files
    inv = InventoryManager(loader=dl, sources=[str(inventory)])
    entity = inv.get_host(host)
    if entity is None:
        hosts = sorted(h.name for h in inv.get_hosts("all"))
        raise HostVarsError("no host %s in the inventory %s (its hosts: %s)"
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
        variables = role_defaults(dl, roles)
        variables.update(manager.get_vars(host=entity, include_hostvars=True))
    except AnsibleError as e:
        raise HostVarsError("%s in %s: %s" % (host, inventory, e.message))
    for f in play_vars_files:
        variables.update(load(dl, f))
    variables.update(manager.extra_vars)
    return dl, variables


def resolve(dl, variables, names, where=""):
    """{name: value} of those of ``names`` that ``variables`` has, templated as Ansible would.
    Raises HostVarsError naming the variable when Ansible cannot template it."""
    templar = Templar(loader=dl, variables=variables)
    out = {}
    for name in names:
        if name in variables:
            try:
                out[name] = templar.template(variables[name])
            except AnsibleError as e:
                raise HostVarsError("%s%s cannot be templated: %s" % (name, where, e.message))
    return out


def url_of(values):
    """Where the controller reaches the host's server: ansible_host (else the inventory name) at
    sglang_port, as the deploy's readiness check asks it on the host (plain HTTP)."""
    host = values.get("ansible_host") or values.get("inventory_hostname")
    if ":" in str(host):
        host = "[%s]" % host
    return "http://%s:%s" % (host, values.get("sglang_port"))

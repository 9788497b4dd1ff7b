# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""podman_nsenter: run tasks in a local, rootful podman container by entering its namespaces.

Why not the collection's containers.podman.podman: its `podman exec` calls (five a task, no
pipelining) make the test suite CPU-bound; the figures are in docs/testing.md, "The transport".
For the same reason a module's Python is compiled once per container, not once per task (see
`_cached_compile`).
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: podman_nsenter
short_description: Run tasks in a local rootful podman container through nsenter
description:
  - For the repository's local test containers (scripts/local-host.sh, Molecule's podman driver).
    The container's PID 1 is looked up once per playbook run (C(podman inspect)); every command
    then runs with C(nsenter --all) in the container's namespaces (mount, UTS, IPC, network, PID,
    cgroup), its root and working directory, and its PID 1's environment. Modules are pipelined
    (sent on stdin, no temporary files); files are written and read by a shell inside the
    container, so paths and symlinks resolve as the container sees them.
  - A pipelined Python module (an AnsiballZ wrapper) runs with its zipped module_utils compiled
    through a bytecode cache in the container (C(/tmp/ansible-nsenter-pyc-UID), keyed by the
    source's SHA-256). Python never caches what it imports from a zip, and compiling Ansible's
    module_utils anew was most of each task's CPU. The module and its code are unchanged.
  - Differences from C(podman exec) that tests must not rely on - the commands run in the
    controller's cgroups and with its resource limits (systemd inside the container, and what it
    starts, are unaffected).
  - Needs root on the controller (rootful podman) and C(nsenter) from util-linux.
options:
  remote_addr:
    description: The container's name or ID.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_podman_host
  remote_user:
    description: Only root (or unset) is supported.
    vars:
      - name: ansible_user
  podman_executable:
    description: The podman executable (for C(podman inspect)).
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
"""

import json
import os
import shlex
import shutil
import subprocess

from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

# What marks a pipelined module as a Python AnsiballZ wrapper (ansible/_internal/_ansiballz).
_ANSIBALLZ_MARK = b"\n_ANSIBALLZ_WRAPPER = True"
# Run before the wrapper, in the container's Python: zipimport's compile step (a module-level
# function of the standard library's zipimport, which compiles every .py it imports from a zip)
# goes through a per-user cache of marshalled code, keyed by the source's hash and the
# interpreter's cache tag. A cache directory that is not the user's own, mode 0700, is not used.
# The wrapper itself then runs as __main__ would have run it from stdin.
_CACHED_COMPILE = r"""
def _cached_compile():
    import hashlib, marshal, os, stat, sys, tempfile, types, zipimport, _imp
    base = os.path.join(tempfile.gettempdir(), "ansible-nsenter-pyc-%d" % os.getuid())
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return
    compile_source, tag = zipimport._compile_source, sys.implementation.cache_tag

    def cached(pathname, source):
        path = os.path.join(base, "%s.%s" % (hashlib.sha256(source).hexdigest(), tag))
        try:
            with open(path, "rb") as fh:
                code = marshal.load(fh)
        except (OSError, EOFError, ValueError, TypeError):
            code = None
        if not isinstance(code, types.CodeType):
            code = compile_source(pathname, source)
            try:
                with open("%s.%d" % (path, os.getpid()), "wb") as fh:
                    marshal.dump(code, fh)
                os.replace(fh.name, path)
            except OSError:
                pass
            return code
        _imp._fix_co_filename(code, pathname)
        return code
    zipimport._compile_source = cached
try:
    _cached_compile()
except Exception:
    pass
del _cached_compile
exec(compile(WRAPPER, "<stdin>", "exec"), globals())
"""


def _cached_compile(in_data):
    """A pipelined AnsiballZ wrapper, run after the compile cache is in place; other input as is."""
    if not in_data or _ANSIBALLZ_MARK not in in_data:
        return in_data
    shebang, _, _ = in_data.partition(b"\n")
    return b"%s\n%s" % (shebang if shebang.startswith(b"#!") else b"",
                         _CACHED_COMPILE.replace("WRAPPER", repr(in_data)).encode())


def _start_time(pid):
    """Field 22 of /proc/PID/stat (start time in clock ticks), None when the process is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return int(stat.rsplit(b")", 1)[1].split()[19])


class Connection(ConnectionBase):
    transport = "podman_nsenter"
    has_pipelining = True
    always_pipeline_modules = True  # the point of this plugin; no option to turn it off

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pid = None
        self._env = None
        self._nsenter = None

    # -- the container's PID 1 -----------------------------------------------------------------
    def _cache_path(self, name):
        # DEFAULT_LOCAL_TMP is this playbook run's directory, shared by the worker processes
        return os.path.join(C.DEFAULT_LOCAL_TMP, "podman_nsenter-%s.json" % name.replace("/", "_"))

    def _inspect(self, name):
        podman = shutil.which(self.get_option("podman_executable"))
        if not podman:
            raise AnsibleError("podman_nsenter: %s not found in PATH" % self.get_option("podman_executable"))
        p = subprocess.run([podman, "inspect", "--type", "container", "--format",
                            "{{.State.Pid}}", name], capture_output=True, text=True)
        if p.returncode != 0:
            raise AnsibleConnectionFailure("podman_nsenter: no container %s: %s" % (name, p.stderr.strip()))
        pid = int(p.stdout.strip() or 0)
        if pid <= 0:
            raise AnsibleConnectionFailure("podman_nsenter: container %s is not running" % name)
        return pid

    def _container_pid(self, name):
        cache = self._cache_path(name)
        try:
            with open(cache) as fh:
                cached = json.load(fh)
            if _start_time(cached["pid"]) == cached["start"]:
                return cached["pid"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
        pid = self._inspect(name)
        start = _start_time(pid)
        if start is None:
            raise AnsibleConnectionFailure("podman_nsenter: container %s stopped while connecting" % name)
        tmp = "%s.%d" % (cache, os.getpid())
        with open(tmp, "w") as fh:
            json.dump({"pid": pid, "start": start}, fh)
        os.replace(tmp, cache)
        return pid

    def _connect(self):
        if self._connected:
            return self
        super()._connect()
        user = self.get_option("remote_user")
        if user not in (None, "", "root", "0"):
            raise AnsibleError("podman_nsenter runs commands as root only, not %r "
                               "(use become, or the containers.podman.podman connection)" % user)
        if os.geteuid() != 0:
            raise AnsibleError("podman_nsenter needs root on the controller (rootful podman)")
        self._nsenter = shutil.which("nsenter")
        if not self._nsenter:
            raise AnsibleError("podman_nsenter: nsenter (util-linux) not found in PATH")
        name = self.get_option("remote_addr")
        self._pid = self._container_pid(name)
        try:
            with open("/proc/%d/environ" % self._pid, "rb") as fh:
                raw = fh.read()
        except OSError as e:
            raise AnsibleConnectionFailure("podman_nsenter: container %s: %s" % (name, e))
        self._env = dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
        display.vvv("NSENTER container %s, PID %d" % (name, self._pid), host=name)
        self._connected = True
        return self

    def _run(self, argv, in_data=None, stdout=subprocess.PIPE):
        self._connect()
        cmd = [self._nsenter, "--target", str(self._pid), "--all", "--root", "--wd", "--"] + argv
        display.vvv("EXEC %s" % (argv,), host=self.get_option("remote_addr"))
        p = subprocess.Popen([to_bytes(a, errors="surrogate_or_strict") for a in cmd], env=self._env,
                             stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE)
        out, err = p.communicate(in_data)
        if p.returncode == 1 and _start_time(self._pid) is None:
            raise AnsibleConnectionFailure("podman_nsenter: container %s stopped"
                                           % self.get_option("remote_addr"))
        return p.returncode, out, err

    # -- the connection interface --------------------------------------------------------------
    def exec_command(self, cmd, in_data=None, sudoable=False):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        return self._run(shlex.split(to_native(cmd, errors="surrogate_or_strict")), _cached_compile(in_data))

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        display.vvv("PUT %s TO %s" % (in_path, out_path), host=self.get_option("remote_addr"))
        with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as fh:
            data = fh.read()
        rc, _out, err = self._run(["/bin/sh", "-c", 'cat > "$1"', "sh", out_path], data)
        if rc != 0:
            raise AnsibleError("podman_nsenter: cannot write %s in the container: %s"
                               % (out_path, to_native(err).strip()))

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        display.vvv("FETCH %s TO %s" % (in_path, out_path), host=self.get_option("remote_addr"))
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as fh:
            rc, _out, err = self._run(["cat", "--", in_path], stdout=fh)
        if rc != 0:
            os.unlink(to_bytes(out_path, errors="surrogate_or_strict"))
            raise AnsibleError("podman_nsenter: cannot read %s in the container: %s"
                               % (in_path, to_native(err).strip()))

    def close(self):
        self._connected = False

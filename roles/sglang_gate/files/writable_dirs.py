"""Can the gate write where its variables point? Run on the host by the sglang_gate role's
validate.yml (python -c, read-only: it creates nothing):

    python3 -c "$(cat writable_dirs.py)" STATE_DIR VAR=PATH=file|dir ...

prints one line per problem, "VAR = PATH: reason". ``file``: the gate appends to PATH and creates no
directory for it, so its directory must exist (or be STATE_DIR, which the sglang role creates);
``dir``: the gate creates PATH with its parents, so the nearest existing ancestor counts.
"""
import os
import sys

PSEUDO = ("/proc", "/sys", "/dev")


def _under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def problem(path, kind, state_dir):
    path = os.path.normpath(path)
    if not os.path.isabs(path):
        return "not an absolute path"
    for top in PSEUDO:
        if _under(path, top):
            return "%s is a kernel file system, not storage" % top
    if kind == "file" and os.path.isdir(path):
        return "a directory, not a file"
    target = os.path.dirname(path) if kind == "file" else path
    probe = target
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if kind == "file" and probe != target and target != os.path.normpath(state_dir):
        return "its directory %s does not exist (the gate creates none for it)" % target
    if not os.path.isdir(probe):
        return "%s is not a directory" % probe
    if os.statvfs(probe).f_flag & os.ST_RDONLY:
        return "%s is on a read-only file system" % probe
    if not os.access(probe, os.W_OK):
        return "%s is not writable" % probe
    return ""


def main(argv):
    state_dir = argv[0]
    for spec in argv[1:]:
        var, rest = spec.split("=", 1)
        path, kind = rest.rsplit("=", 1)
        reason = problem(path, kind, state_dir)
        if reason:
            print("%s = %s: %s" % (var, path, reason))


if __name__ == "__main__":
    main(sys.argv[1:])

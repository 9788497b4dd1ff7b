#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are not installed yet (apt-get,
# --no-install-recommends; the package lists are refreshed only when a package has no candidate,
# or once when the install fails on stale lists). Nothing to do: exits 0 at once, without root.
#
#   scripts/host-packages.sh PACKAGE...        (scripts/podman-setup.sh: podman, runc, ...;
#                                               make chromium: the HTML report's test browser)
#
# Progress and the time the install took go to stderr, prefixed [host-packages].
set -euo pipefail

log() { printf '[host-packages] %s\n' "$*" >&2; }
die() { printf '[host-packages] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$#" -gt 0 ] || die "usage: $0 PACKAGE..."

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
no_candidate() { apt-cache policy "$1" 2>/dev/null | grep -q 'Candidate: (none)' \
    || [ -z "$(apt-cache policy "$1" 2>/dev/null)" ]; }

missing=()
for p in "$@"; do installed "$p" || missing+=("$p"); done
[ "${#missing[@]}" -gt 0 ] || exit 0

command -v apt-get >/dev/null || die "missing host packages (${missing[*]}) and no apt-get: install them by hand"
[ "$(id -u)" -eq 0 ] || die "missing host packages (${missing[*]}): run as root or: sudo apt-get install ${missing[*]}"
log "installing host packages: ${missing[*]}"
start="$(date +%s)"
export DEBIAN_FRONTEND=noninteractive
need_update=0
for p in "${missing[@]}"; do no_candidate "$p" && need_update=1; done
if [ "$need_update" -eq 1 ]; then
    apt-get update -qq >&2 || die "apt-get update failed"
fi
apt_install() { apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
if ! apt_install; then
    # Stale package lists (404 on a superseded version): refresh once and retry.
    [ "$need_update" -eq 1 ] && die "apt-get install ${missing[*]} failed"
    log "apt-get install failed; refreshing the package lists and retrying"
    apt-get update -qq >&2 || die "apt-get update failed"
    apt_install || die "apt-get install ${missing[*]} failed"
fi
for p in "${missing[@]}"; do installed "$p" || die "package $p is still not installed"; done
log "installed ${missing[*]} in $(( $(date +%s) - start )) s"

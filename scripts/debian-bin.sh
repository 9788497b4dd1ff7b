#!/usr/bin/env bash
# A program from a Debian package for the tests, unpacked into .tools/bin/ (git-ignored): the
# package fetched with `apt-get download` from the machine's own apt sources and unpacked with
# dpkg-deb; only usr/bin/PROGRAM is kept. Nothing is installed on the system.
#
#   scripts/debian-bin.sh PACKAGE PROGRAM...
#
# scripts/promtool.sh (promtool from prometheus) and scripts/prometheus.sh (prometheus, and
# prometheus-node-exporter's) call it. Idempotent: exits at once when every .tools/bin/PROGRAM
# answers --version. The package lists are refreshed only when the download fails (as root, or
# with sudo when it needs no password). Progress and the time it took go to stderr, prefixed
# [PACKAGE].
set -euo pipefail

[ "$#" -ge 2 ] || { echo "usage: $0 PACKAGE PROGRAM..." >&2; exit 2; }
package="$1"
shift
log() { printf '[%s] %s\n' "$package" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$package" "$*" >&2; exit 1; }

root="$(cd "$(dirname "$0")/.." && pwd)"
bindir="$root/.tools/bin"
runs() { [ -x "$bindir/$1" ] && "$bindir/$1" --version >/dev/null 2>&1; }
missing=()
for program in "$@"; do
    runs "$program" || missing+=("$program")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
command -v apt-get >/dev/null || die "no apt-get here: put ${missing[*]} into $bindir by hand"
command -v dpkg-deb >/dev/null || die "no dpkg-deb here: put ${missing[*]} into $bindir by hand"
start="$(date +%s)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# apt downloads as its own user, _apt, when it may write the directory (else it warns and
# downloads as root)
if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then
    chown _apt "$work"
fi

download() { (cd "$work" && apt-get download -qq "$package") >&2; }
refresh() {
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq >&2
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n apt-get update -qq >&2
    else
        die "apt-get download $package failed and the package lists cannot be refreshed without root: run sudo apt-get update, then $0 $package $*"
    fi
}
log "fetching Debian's $package package for ${missing[*]}"
if ! download; then
    log "download failed; refreshing the package lists and retrying"
    refresh || die "apt-get update failed"
    download || die "apt-get download $package failed"
fi
deb="$(find "$work" -maxdepth 1 -name "${package}_*.deb" | head -n 1)"
[ -n "$deb" ] || die "apt-get download left no ${package}_*.deb"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" "${missing[@]/#/./usr/bin/}"
mkdir -p "$bindir"
for program in "${missing[@]}"; do
    install -m 0755 "$work/usr/bin/$program" "$bindir/$program.tmp"
    mv "$bindir/$program.tmp" "$bindir/$program"
    runs "$program" || die "$bindir/$program does not run"
    log "$("$bindir/$program" --version 2>&1 | head -n 1) at .tools/bin/$program in $(( $(date +%s) - start )) s"
done

#!/usr/bin/env bash
# Prometheus' promtool for tests/test_monitoring.py (`promtool check rules`, `promtool test rules`
# on monitoring/), from Debian's prometheus package: fetched with `apt-get download` from the
# machine's own apt sources and unpacked with dpkg-deb; only usr/bin/promtool is kept, at
# .tools/bin/promtool (git-ignored). Nothing is installed on the system.
#
#   scripts/promtool.sh        (make promtool; make check and scripts/suite.py's set-up run it)
#
# Idempotent: exits at once when .tools/bin/promtool runs. The package lists are refreshed only
# when the download fails (as root, or with sudo when it needs no password). Progress and the time
# it took go to stderr, prefixed [promtool].
set -euo pipefail

log() { printf '[promtool] %s\n' "$*" >&2; }
die() { printf '[promtool] ERROR: %s\n' "$*" >&2; exit 1; }

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.tools/bin/promtool"
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
    exit 0
fi
command -v apt-get >/dev/null || die "no apt-get here: put Prometheus' promtool at $bin by hand"
command -v dpkg-deb >/dev/null || die "no dpkg-deb here: put Prometheus' promtool at $bin by hand"
start="$(date +%s)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# apt downloads as its own user, _apt, when it may write the directory (else it warns and
# downloads as root)
if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then
    chown _apt "$work"
fi

download() { (cd "$work" && apt-get download -qq prometheus) >&2; }
refresh() {
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq >&2
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo -n apt-get update -qq >&2
    else
        die "apt-get download prometheus failed and the package lists cannot be refreshed without root: run sudo apt-get update, then $0"
    fi
}
log "fetching Debian's prometheus package for promtool"
if ! download; then
    log "download failed; refreshing the package lists and retrying"
    refresh || die "apt-get update failed"
    download || die "apt-get download prometheus failed"
fi
deb="$(find "$work" -maxdepth 1 -name 'prometheus_*.deb' | head -n 1)"
[ -n "$deb" ] || die "apt-get download left no prometheus_*.deb"
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" ./usr/bin/promtool
mkdir -p "$(dirname "$bin")"
install -m 0755 "$work/usr/bin/promtool" "$bin.tmp"
mv "$bin.tmp" "$bin"
"$bin" --version >/dev/null 2>&1 || die "$bin does not run"
log "$("$bin" --version 2>&1 | head -n 1) at ${bin#"$root"/} in $(( $(date +%s) - start )) s"

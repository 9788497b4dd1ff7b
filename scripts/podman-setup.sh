#!/usr/bin/env bash
# Container infrastructure for the local deploy target (no GPU, no registry, no Docker engine):
#   1. host packages from Debian: podman, runc, mmdebstrap, zstd, python3-venv (installed only when missing,
#      by scripts/host-packages.sh)
#   2. the repo-local containers.conf (.podman/containers.conf): runtime runc, default ulimits
#   3. a Debian 12 root filesystem with systemd (mmdebstrap, cached as .tar.zst, keyed on suite + packages)
#   4. the image localhost/sglang-deploy/debian12-systemd:<key> (podman import), also tagged :latest
#   5. the deploy image localhost/sglang-deploy/debian12-systemd-deploy:<key> (:latest): the same
#      root filesystem with the apt packages every deploy installs (DEPLOY_PACKAGES), which the
#      Molecule scenarios that deploy start from (the `sglang` and `nvidia_gpu` scenarios keep
#      the bare image: they test a fresh host)
#
# Idempotent and fast when everything is already there. Progress and timings go to stderr; stdout
# carries only KEY=value lines for callers (eval-able):
#   CONTAINERS_CONF=...  SGLANG_DEPLOY_IMAGE=...  SGLANG_DEPLOY_IMAGE_LATEST=...
#   SGLANG_DEPLOY_DEPLOY_IMAGE_LATEST=...
# Every podman call in this repository must run with that CONTAINERS_CONF.
#
# The package mirror is read from this machine's apt sources at run time (deb822 *.sources and
# one-line *.list); no mirror host name is written here. SGLANG_DEPLOY_MIRROR overrides it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE="bookworm"
IMAGE_REPO="localhost/sglang-deploy/debian12-systemd"
DEPLOY_IMAGE_REPO="localhost/sglang-deploy/debian12-systemd-deploy"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/sglang-deploy"
CONF_DIR="$ROOT/.podman"
CONF="$CONF_DIR/containers.conf"
# Bump when the build recipe below changes in a way the package list does not show.
RECIPE="3"
HOST_PACKAGES=(podman runc mmdebstrap zstd python3-venv)
# Enough for Ansible (python3, python3-apt for the apt module, acl for become_user) and for
# systemd as PID 1 (systemd-sysv gives /sbin/init, dbus for systemctl); the rest are for debugging
# and for the services the roles deploy.
ROOTFS_PACKAGES=(acl ca-certificates curl dbus iproute2 procps python3 python3-apt sudo systemd systemd-sysv)
# What the sglang role installs on every host (roles/sglang/tasks/install.yml: the venv and
# Ansible's pip module).
DEPLOY_PACKAGES=(python3-venv python3-pip)

export CONTAINERS_CONF="$CONF"

log() { printf '[podman-setup] %s\n' "$*" >&2; }
die() { printf '[podman-setup] ERROR: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
T_ALL="$(now)"
T_STEP="$T_ALL"
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b - a}'; }
step_done() {  # step_done "what": print the step's duration, start the next one
    log "$(printf '%-36s %6s s' "$1" "$(secs "$T_STEP")")"
    T_STEP="$(now)"
}

# ---------------------------------------------------------------------------------------------
# 1. Host packages
# ---------------------------------------------------------------------------------------------
"$ROOT/scripts/host-packages.sh" "${HOST_PACKAGES[@]}" || die "host packages (${HOST_PACKAGES[*]}) not installed"
for c in podman runc mmdebstrap zstd; do command -v "$c" >/dev/null || die "$c not found in PATH"; done
step_done "host packages"

# ---------------------------------------------------------------------------------------------
# 2. containers.conf (runc: crun 1.8 fails on this cgroup v1/v2 hybrid; the runtime can only be
#    chosen here). The host lacks CAP_SYS_RESOURCE, so the container's rlimits may not exceed the
#    host's hard limits; a --ulimit on the command line would replace all defaults, so both are set.
# ---------------------------------------------------------------------------------------------
limit() {  # limit WANT HARD -> min(WANT, HARD)
    if [ "$2" = "unlimited" ] || [ "$2" -ge "$1" ]; then echo "$1"; else echo "$2"; fi
}
NOFILE="$(limit 20000 "$(ulimit -Hn)")"
NPROC="$(limit 20000 "$(ulimit -Hu)")"
conf_text="# Written by scripts/podman-setup.sh; every podman call in the repo uses it (CONTAINERS_CONF).
[containers]
default_ulimits = [\"nofile=${NOFILE}:${NOFILE}\", \"nproc=${NPROC}:${NPROC}\"]

[engine]
runtime = \"runc\"
# No systemd on the host (PID 1 is not systemd): plain cgroupfs, events to a file.
cgroup_manager = \"cgroupfs\"
events_logger = \"file\"
"
mkdir -p "$CONF_DIR"
if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "${conf_text%$'\n'}" ]; then
    printf '%s' "$conf_text" > "$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
    log "wrote $CONF"
fi
runtime="$(podman info --format '{{.Host.OCIRuntime.Name}}' 2>&1)" || die "podman does not run: $runtime"
[ "$runtime" = "runc" ] || die "podman uses OCI runtime '$runtime', expected runc (is $CONF used?)"
step_done "containers.conf + podman info"

# ---------------------------------------------------------------------------------------------
# 3. Root filesystem
# ---------------------------------------------------------------------------------------------
# This machine's own trust anchors (/usr/local/share/ca-certificates, e.g. an egress proxy's CA)
# go into the image so apt, curl and pip in the container trust what the machine trusts; pip is
# pointed at the system bundle (as the machine's pip.conf does), since a venv's pip otherwise
# uses its own certifi bundle. The key changes with them.
EXTRA_CA_DIR=/usr/local/share/ca-certificates
CA_SUM="$(find "$EXTRA_CA_DIR" -name '*.crt' -type f 2>/dev/null | LC_ALL=C sort | xargs -r cat | sha256sum | cut -c1-12)"
# image_names REPO NAME PACKAGE...: SORTED, KEY, IMAGE and TARBALL of one image (the key covers
# the recipe, suite, packages and extra CAs)
image_names() {
    local repo="$1" name="$2"
    shift 2
    mapfile -t SORTED < <(printf '%s\n' "$@" | LC_ALL=C sort -u)
    KEY="$(printf 'recipe=%s\nsuite=%s\npackages=%s\nca=%s\n' "$RECIPE" "$SUITE" "${SORTED[*]}" "$CA_SUM" | sha256sum | cut -c1-12)"
    IMAGE="$repo:$KEY"
    TARBALL="$CACHE_DIR/$name-$KEY.tar.zst"
}

# The Debian mirror URIs of this machine's apt sources: "URI SUITE" pairs for the enabled deb
# entries whose suite is $SUITE, $SUITE-updates or $SUITE-security.
apt_mirrors() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v s="$SUITE" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && enabled != "no")
                    for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
                        if (suites[j] == s || suites[j] == s "-updates" || suites[j] == s "-security")
                            print uris[i], suites[j]
                types = ""; enabled = ""; nu = 0; ns = 0
            }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]*#/ { next }
            {
                line = $0; sub(/^[ \t]+/, "", line)
                k = tolower(substr(line, 1, index(line, ":") - 1)); v = substr(line, index(line, ":") + 1)
                gsub(/^[ \t]+|[ \t]+$/, "", v)
                if (k == "types") types = v
                else if (k == "enabled") enabled = tolower(v)
                else if (k == "uris") nu = split(v, uris, /[ \t]+/)
                else if (k == "suites") ns = split(v, suites, /[ \t]+/)
            }
            END { flush() }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v s="$SUITE" '
            $1 == "deb" {
                i = 2
                if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ($(i+1) == s || $(i+1) == s "-updates" || $(i+1) == s "-security") print $i, $(i+1)
            }' "$f"
    done
}

build_rootfs() {
    local mirrors=() uri suite
    if [ -n "${SGLANG_DEPLOY_MIRROR:-}" ]; then
        mirrors=("deb $SGLANG_DEPLOY_MIRROR $SUITE main")
    else
        while read -r uri suite; do
            case "$uri" in http://* | https://* | file:/*) ;; *) continue ;; esac
            mirrors+=("deb ${uri%/} $suite main")
        done < <(apt_mirrors | awk '!seen[$0]++')
    fi
    [ "${#mirrors[@]}" -gt 0 ] || die "no Debian '$SUITE' mirror found in /etc/apt/sources.list or
  /etc/apt/sources.list.d/*.sources; set SGLANG_DEPLOY_MIRROR=<mirror URL>"
    printf '%s\n' "${mirrors[@]}" | grep -q " $SUITE main\$" \
        || die "the apt sources have no entry for suite '$SUITE' itself (only: ${mirrors[*]})"
    [ "$(id -u)" -eq 0 ] || die "building the root filesystem needs root (mmdebstrap root mode)"
    mkdir -p "$CACHE_DIR"
    local pkgs
    TMP_TARBALL="$TARBALL.tmp.$$.tar.zst"
    pkgs="$(IFS=,; echo "${SORTED[*]}")"
    log "building the $SUITE rootfs with mmdebstrap (${#mirrors[@]} sources: ${mirrors[*]})"
    log "packages: $pkgs"
    trap 'rm -f "$TMP_TARBALL"' EXIT
    # Docs, man pages and translations are left out (dpkg path-exclude, kept in the image so later
    # installs stay small too); copyright files stay. The hook's $1 (the chroot) is mmdebstrap's.
    # shellcheck disable=SC2016
    if ! mmdebstrap --variant=apt --mode=root --format=tar --quiet \
        --include="$pkgs" \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-include=/usr/share/locale/locale.alias' \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --customize-hook='rm -f "$1/etc/machine-id" "$1/var/lib/dbus/machine-id"; : > "$1/etc/machine-id"' \
        --customize-hook="if [ -d $EXTRA_CA_DIR ]; then find $EXTRA_CA_DIR -name '*.crt' -type f -exec cp {} \"\$1$EXTRA_CA_DIR/\" \\; ; fi; chroot \"\$1\" update-ca-certificates >/dev/null" \
        --customize-hook='printf "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n" > "$1/etc/pip.conf"' \
        "$SUITE" "$TMP_TARBALL" "${mirrors[@]}" >&2; then
        die "mmdebstrap failed (see above)"
    fi
    mv "$TMP_TARBALL" "$TARBALL"
    trap - EXIT
}

# One build/import at a time (make test, Molecule and a user may start this together).
mkdir -p "$CACHE_DIR"
exec 9>"$CACHE_DIR/.lock"
flock --timeout 900 9 || die "timed out waiting for $CACHE_DIR/.lock (another podman-setup.sh run?)"

# make_image REPO NAME PACKAGE...: the root filesystem (cached) and the image, tagged :latest.
make_image() {
    local repo="$1" latest_id image_id
    image_names "$@"
    if [ -s "$TARBALL" ]; then
        log "rootfs cached: $TARBALL"
    else
        build_rootfs
        log "rootfs: $TARBALL ($(du -h "$TARBALL" | cut -f1))"
    fi
    step_done "rootfs $2"
    if podman image exists "$IMAGE"; then
        log "image exists: $IMAGE"
    else
        log "importing $IMAGE"
        podman import --quiet \
            --change 'CMD ["/sbin/init"]' \
            --change 'STOPSIGNAL SIGRTMIN+3' \
            --message "sglang-deploy Debian 12 systemd rootfs ($KEY)" \
            "$TARBALL" "$IMAGE" >/dev/null 9>&- || die "podman import of $TARBALL failed"
    fi
    latest_id="$(podman image inspect --format '{{.Id}}' "$repo:latest" 2>/dev/null || true)"
    image_id="$(podman image inspect --format '{{.Id}}' "$IMAGE")"
    if [ "$latest_id" != "$image_id" ]; then
        podman tag "$IMAGE" "$repo:latest"
        log "tagged $repo:latest"
    fi
    step_done "image $2"
}

make_image "$DEPLOY_IMAGE_REPO" "debian12-$SUITE-systemd-deploy" "${ROOTFS_PACKAGES[@]}" "${DEPLOY_PACKAGES[@]}"
make_image "$IMAGE_REPO" "debian12-$SUITE-systemd" "${ROOTFS_PACKAGES[@]}"
log "$(printf '%-36s %6s s' "total" "$(secs "$T_ALL")")"

printf 'CONTAINERS_CONF=%s\n' "$CONF"
printf 'SGLANG_DEPLOY_IMAGE=%s\n' "$IMAGE"
printf 'SGLANG_DEPLOY_IMAGE_LATEST=%s\n' "$IMAGE_REPO:latest"
printf 'SGLANG_DEPLOY_DEPLOY_IMAGE_LATEST=%s\n' "$DEPLOY_IMAGE_REPO:latest"

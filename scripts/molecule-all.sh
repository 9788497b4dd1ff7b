#!/usr/bin/env bash
# Run every Molecule scenario (molecule/<name>/molecule.yml) one after another with
# `molecule test -s <name>`, print the wall time each took and a summary table; exit 1 when any
# failed (all are run regardless).
#
#   scripts/molecule-all.sh                  # every scenario
#   scripts/molecule-all.sh sglang nvidia_gpu   # only these
#
# Needs what `make molecule` (or `make test`) prepares first: the venv (.venv, with Molecule), the
# Debian 12 systemd image (scripts/podman-setup.sh) and the emulator wheel (make dist).
# Each scenario's full output also goes to out/molecule/<name>.log.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
export PATH="$ROOT/.venv/bin:$PATH"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/.podman/containers.conf}"
LOG_DIR="$ROOT/out/molecule"

die() { printf '[molecule-all] ERROR: %s\n' "$*" >&2; exit 2; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.0f", b - a}'; }

command -v molecule >/dev/null || die "no molecule in $ROOT/.venv: run make venv"
[ -f "$CONTAINERS_CONF" ] || die "no $CONTAINERS_CONF: run scripts/podman-setup.sh"
ls dist/sglang_emulator-*.whl >/dev/null 2>&1 || die "no emulator wheel in dist/: run make dist"

if [ "$#" -gt 0 ]; then
    scenarios=("$@")
else
    mapfile -t scenarios < <(find molecule -mindepth 2 -maxdepth 2 -name molecule.yml -printf '%h\n' \
        | xargs -n1 basename | LC_ALL=C sort)
fi
[ "${#scenarios[@]}" -gt 0 ] || die "no scenarios under molecule/"
for s in "${scenarios[@]}"; do
    [ -f "molecule/$s/molecule.yml" ] || die "no scenario '$s' (molecule/$s/molecule.yml)"
done

mkdir -p "$LOG_DIR"
names=() results=() times=()
failed=0
t_all="$(now)"
for s in "${scenarios[@]}"; do
    printf '\n[molecule-all] === %s: molecule test -s %s (log: out/molecule/%s.log)\n' "$s" "$s" "$s"
    t0="$(now)"
    # The base config named explicitly: Molecule only finds it by itself in a git checkout.
    molecule --base-config "$ROOT/.config/molecule/config.yml" test -s "$s" 2>&1 | tee "$LOG_DIR/$s.log"
    rc="${PIPESTATUS[0]}"
    took="$(secs "$t0" "$(now)")"
    if [ "$rc" -eq 0 ]; then result=passed; else result="FAILED (rc $rc)"; failed=$((failed + 1)); fi
    printf '[molecule-all] === %s: %s in %s s\n' "$s" "$result" "$took"
    names+=("$s") results+=("$result") times+=("$took")
done
total="$(secs "$t_all" "$(now)")"

printf '\n[molecule-all] summary\n'
printf '  %-20s %-16s %8s\n' scenario result "time (s)"
for i in "${!names[@]}"; do
    printf '  %-20s %-16s %8s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
done
printf '  %-20s %-16s %8s\n' total "$(( ${#names[@]} - failed ))/${#names[@]} passed" "$total"
[ "$failed" -eq 0 ]

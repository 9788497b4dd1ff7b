#!/usr/bin/env bash
# The embedded default deploy target: a systemd container standing in for a GPU host.
#
#   scripts/local-host.sh up       create/start it (idempotent; recreated when the image or port changed)
#   scripts/local-host.sh down     remove it
#   scripts/local-host.sh status   state, image, port, systemd state (exit 0 only when it runs)
#   scripts/local-host.sh shell    a shell inside it (or: ... shell CMD ARGS... to run one command)
#   scripts/local-host.sh up-all   up for every container of the test suite's container tier
#   scripts/local-host.sh hosts    those containers, one "name port" line each
#
# Container LOCAL_HOST_NAME (default sglang-local), hostname ct-local, systemd as PID 1, port 30000
# inside published on 127.0.0.1:LOCAL_HOST_PORT (default 30000). Ansible reaches it through the
# podman_nsenter connection (inventories/local/hosts.yml).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NAME="${LOCAL_HOST_NAME:-sglang-local}"
PORT="${LOCAL_HOST_PORT:-30000}"
HOSTNAME_IN="ct-local"
BOOT_TIMEOUT="${LOCAL_HOST_BOOT_TIMEOUT:-60}"
IMAGE="localhost/sglang-deploy/debian12-systemd:latest"
# The container tier's hosts (tests/conftest.py reads `hosts`): the embedded default and three more,
# so the tier's test files run side by side, each file on one of them (all hostname ct-local).
TEST_HOSTS=("sglang-local 30000" "sglang-local-2 30002" "sglang-local-3 30003" "sglang-local-4 30004")
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/.podman/containers.conf}"

log() { printf '[local-host] %s\n' "$*" >&2; }
die() { printf '[local-host] ERROR: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b - a}'; }

case "$PORT" in '' | *[!0-9]*) die "LOCAL_HOST_PORT must be a port number, not '$PORT'" ;; esac

have_podman() { command -v podman >/dev/null && [ -f "$CONTAINERS_CONF" ]; }
exists() { podman container exists "$NAME"; }
state() { podman container inspect --format '{{.State.Status}}' "$NAME" 2>/dev/null || echo absent; }
label() { podman container inspect --format "{{index .Config.Labels \"$1\"}}" "$NAME" 2>/dev/null || true; }
systemd_state() {  # the answer of `systemctl is-system-running` inside (empty when it cannot answer)
    podman exec "$NAME" systemctl is-system-running 2>/dev/null || true
}

wait_booted() {
    local t0 st="" deadline
    t0="$(now)"
    deadline=$(( $(date +%s) + BOOT_TIMEOUT ))
    while :; do
        st="$(systemd_state)"
        case "$st" in
            running | degraded) break ;;
        esac
        if [ "$(state)" != "running" ] || [ "$(date +%s)" -ge "$deadline" ]; then
            log "container logs (podman logs):"
            podman logs --tail 100 "$NAME" >&2 || true
            log "journal inside (systemd logs there, not to the console):"
            podman exec "$NAME" journalctl --boot --no-pager --lines 100 >&2 || true
            log "pending jobs:"
            podman exec "$NAME" systemctl list-jobs --no-pager >&2 || true
            die "$NAME did not boot within ${BOOT_TIMEOUT} s (container: $(state), systemd: ${st:-no answer})"
        fi
        sleep 0.2
    done
    log "systemd in $NAME: $st ($(secs "$t0") s)"
    if [ "$st" = "degraded" ]; then
        log "failed units:"
        podman exec "$NAME" systemctl --failed --no-legend --plain >&2 || true
    fi
}

# The stand-in host's "pre-staged weights": the model directory the local inventory points
# sglang_model_path at, holding the tiny synthetic model scripts/stand_in_hub.py writes (config.json
# SGLang and the emulator read the architecture from, a safetensors index and two shards the role's
# completeness check accepts), and beside it the dflash profile's drafter (its config.json a DFlash
# drafter's, block size 16), where the plan places it (sglang_perf/plan/drafter.py).
MODEL_DIR=/srv/models/Qwen3.6-27B
DRAFTER_DIR=/srv/models/Qwen3.6-27B-DFlash
stage_model() {
    local dir
    for dir in "$MODEL_DIR" "$DRAFTER_DIR"; do
        podman exec "$NAME" test -s "$dir/model.safetensors.index.json" 9>&- && continue
        podman exec -i "$NAME" python3 - model "$dir" $([ "$dir" = "$DRAFTER_DIR" ] && echo --drafter) 9>&- \
            <"$ROOT/scripts/stand_in_hub.py" || die "could not stage the stand-in weights at $dir in $NAME"
        log "staged the stand-in weights at $dir"
    done
}

# The stand-in host's nvidia-smi (there is no GPU): scripts/nvidia_smi_standin.py, answering what
# the gate's fingerprint asks as a 2 x RTX A6000 host would, off PATH (the GPU stack's own checks
# still see no GPU); the local inventory's sglang_gate_nvidia_smi names it. A test varies the host
# by writing $NVIDIA_SMI.json (the stand-in's docstring).
NVIDIA_SMI=/usr/local/lib/sglang-test/nvidia-smi
stage_nvidia_smi() {
    podman exec -i "$NAME" sh -c "mkdir -p '${NVIDIA_SMI%/*}' && cat > '$NVIDIA_SMI.new' && chmod 0755 '$NVIDIA_SMI.new' \
        && mv '$NVIDIA_SMI.new' '$NVIDIA_SMI'" 9>&- <"$ROOT/scripts/nvidia_smi_standin.py" \
        || die "could not install the stand-in nvidia-smi in $NAME"
}

cmd_up() {
    local t0 image_id setup_out
    t0="$(now)"
    # Always ask the set-up for the current image (0.3 s when everything is there): a changed
    # package list gives a new image, and the container is then recreated from it.
    setup_out="$("$ROOT/scripts/podman-setup.sh")" || die "scripts/podman-setup.sh failed"
    IMAGE="$(sed -n 's/^SGLANG_DEPLOY_IMAGE=//p' <<<"$setup_out")"
    [ -n "$IMAGE" ] || die "scripts/podman-setup.sh named no image"
    image_id="$(podman image inspect --format '{{.Id}}' "$IMAGE")"

    # Everything the container is created with; a change (image, port, options) recreates it.
    local run_opts=(
        --hostname "$HOSTNAME_IN"
        --systemd=always
        --publish "127.0.0.1:$PORT:30000"
        # systemd's sandboxing (PrivateTmp, ProtectSystem, DynamicUser...) needs mount namespaces:
        # without CAP_SYS_ADMIN systemd 252 silently skips most of it (and DynamicUser fails with
        # 226/NAMESPACE), so a unit's hardening would go untested here.
        --cap-add SYS_ADMIN
    )
    local spec
    create() {
        podman run --detach --quiet --name "$NAME" "${run_opts[@]}" \
            --label sglang-deploy.role=local-host \
            --label "sglang-deploy.port=$PORT" \
            --label "sglang-deploy.spec=$spec" \
            "$IMAGE" /sbin/init >/dev/null 9>&- || die "podman run failed"
    }
    spec="$(printf '%s\n' "$image_id" "${run_opts[@]}" | sha256sum | cut -c1-16)"
    if exists && [ "$(label sglang-deploy.spec)" != "$spec" ]; then
        if [ "$(podman container inspect --format '{{.Image}}' "$NAME")" != "$image_id" ]; then
            log "image changed ($IMAGE): recreating $NAME"
        else
            log "container options changed (now: ${run_opts[*]}): recreating $NAME"
        fi
        podman rm --force --time 10 "$NAME" >/dev/null
    fi
    if ! exists; then
        log "creating $NAME from $IMAGE (hostname $HOSTNAME_IN, 127.0.0.1:$PORT -> 30000)"
        create
    elif [ "$(state)" != "running" ]; then
        log "starting $NAME (was $(state))"
        podman start "$NAME" >/dev/null 9>&- || die "podman start $NAME failed"
    elif ! podman exec "$NAME" true 2>/dev/null; then
        # podman's record says running but the container's processes are gone (killed together
        # with the session that started them, or a host restart): sync the record, then start.
        log "$NAME is recorded as running but its processes are gone: restarting it"
        podman stop --time 0 "$NAME" >/dev/null 2>&1 || true
        if ! podman start "$NAME" >/dev/null 9>&-; then
            log "podman start failed: recreating $NAME"
            podman rm --force --time 0 "$NAME" >/dev/null
            create
        fi
    else
        log "$NAME already running"
    fi
    wait_booted
    stage_model
    stage_nvidia_smi
    log "up in $(secs "$t0") s: ansible host ct-local (container $NAME), http://127.0.0.1:$PORT"
}

cmd_down() {
    if have_podman && exists; then
        podman rm --force --time 10 "$NAME" >/dev/null
        log "removed $NAME"
    else
        log "$NAME does not exist"
    fi
}

cmd_status() {
    if ! have_podman || ! exists; then
        echo "$NAME: absent"
        return 3
    fi
    local st
    st="$(state)"
    echo "$NAME: $st"
    echo "image: $(podman container inspect --format '{{.ImageName}}' "$NAME")"
    echo "port: 127.0.0.1:$(label sglang-deploy.port) -> 30000"
    if [ "$st" = "running" ]; then
        echo "systemd: $(systemd_state)"
        return 0
    fi
    return 3
}

cmd_shell() {
    have_podman && [ "$(state)" = "running" ] || die "$NAME is not running: scripts/local-host.sh up"
    local tty=()
    [ -t 0 ] && [ -t 1 ] && tty=(--interactive --tty)
    [ ! -t 0 ] && tty=(--interactive)
    if [ "$#" -gt 0 ]; then
        exec podman exec "${tty[@]}" "$NAME" "$@"
    fi
    exec podman exec "${tty[@]}" "$NAME" /bin/bash -l
}

usage() { echo "usage: $0 up|down|status|shell [CMD...]|up-all|hosts" >&2; exit 2; }

[ "$#" -ge 1 ] || usage
action="$1"
shift
case "$action" in
    hosts) printf '%s\n' "${TEST_HOSTS[@]}"; exit 0 ;;
    up-all)
        for h in "${TEST_HOSTS[@]}"; do
            read -r n p <<<"$h"
            LOCAL_HOST_NAME="$n" LOCAL_HOST_PORT="$p" "$0" up || exit 1
        done
        exit 0 ;;
esac
if [ "$action" = up ] || [ "$action" = down ]; then
    # One up/down at a time for this container (parallel make targets, tests).
    mkdir -p "$ROOT/.podman"
    exec 9>"$ROOT/.podman/local-host-$NAME.lock"
    flock --timeout 900 9 || die "timed out waiting for another local-host.sh $action"
fi
case "$action" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    shell) cmd_shell "$@" ;;
    *) usage ;;
esac

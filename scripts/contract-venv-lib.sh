# Sourced by scripts/contract-venv.sh and scripts/contract-venv-vllm.sh: a contract venv cached
# under $CACHE as $VENV, built once under a lock. The caller sets CACHE, VENV, LOCK (a file name
# in $CACHE), PYTHON, PRUNE (the glob of its own venvs) and defines log, die and answer (its
# KEY=value lines on stdout).

# Exit with the answer when $VENV is built (now, or by the build we waited for); else, holding the
# lock, start a fresh venv at $VENV.
venv_begin() {
    if [ -f "$VENV/.complete" ]; then log "cached: $VENV"; answer; exit 0; fi
    T0=$(date +%s)
    mkdir -p "$CACHE"
    exec 9>"$CACHE/$LOCK"
    flock --timeout 1800 9 || die "another build holds $CACHE/$LOCK"
    if [ -f "$VENV/.complete" ]; then log "cached: $VENV"; answer; exit 0; fi
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
}

# Mark $VENV complete, drop this script's other venvs unused for 30 days, answer.
venv_end() {
    touch "$VENV/.complete"
    find "$CACHE" -maxdepth 1 -name "$PRUNE" ! -name "${PRUNE_KEEP:-none}" ! -path "$VENV" -mtime +30 \
        -exec rm -rf {} +
    log "built in $(( $(date +%s) - T0 )) s, $(du -sh "$VENV" | cut -f1)"
    answer
}

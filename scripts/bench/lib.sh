# What scripts/bench-http.sh and scripts/bench-resp.sh share, sourced by
# both after they define log() and die(): stopping the servers they started
# (the PID array, name -> pid), the traps that run their cleanup(), the fate
# of their scratch folder $TMP, and waiting for a seqd's JSON start-up line;
# and the scratch folder of the two callgrind scripts.

# stop_servers: SIGTERM to every process in PID, up to 5 s for each to end,
# then SIGKILL; each reaped.
stop_servers() {
    local name i
    for name in "${!PID[@]}"; do kill -TERM "${PID[$name]}" 2>/dev/null || true; done
    for name in "${!PID[@]}"; do
        for i in $(seq 1 50); do
            kill -0 "${PID[$name]}" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "${PID[$name]}" 2>/dev/null || true
        wait "${PID[$name]}" 2>/dev/null || true
    done
}

# trap_cleanup: cleanup() (the script's own) runs on exit; SIGINT and
# SIGTERM exit through it (130, 143).
trap_cleanup() {
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# finish_tmp RC: after a failure (RC not 0) $TMP and its logs are kept, and
# said so; after a success it is removed.
finish_tmp() {
    if [[ $1 -ne 0 ]]; then
        log "failed (exit $1); logs kept in $TMP"
    else
        rm -rf "$TMP"
    fi
}

# seqd_listen NAME LOG: waits (up to 30 s) for the start-up line of the seqd
# PID[NAME] logging to LOG, and prints its HTTP address ("listen"); dies,
# showing the log, if seqd exits or does not start in time.
seqd_listen() {
    local name=$1 log_file=$2 i addr=""
    for i in $(seq 1 300); do
        addr=$(grep -o '"listen":"[^"]*"' "$log_file" 2>/dev/null | head -n1 | cut -d'"' -f4 || true)
        [[ -n $addr ]] && break
        kill -0 "${PID[$name]}" 2>/dev/null || { cat "$log_file" >&2; die "$name exited at start-up"; }
        sleep 0.1
    done
    [[ -n $addr ]] || { cat "$log_file" >&2; die "$name did not start within 30 s"; }
    printf '%s\n' "$addr"
}

# callgrind_tmp PREFIX KEEP (scripts/bench/callgrind.sh, resp_callgrind.sh):
# makes $TMP, a scratch folder for callgrind's files, and VPID (the process
# under valgrind, empty while none runs); on exit that process is stopped and
# $TMP removed, or kept and said where when KEEP is 1.
callgrind_tmp() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    VPID=""
    CG_KEEP_FILES=$2
    cleanup() {
        [[ -n $VPID ]] && { kill "$VPID" 2>/dev/null || true; wait "$VPID" 2>/dev/null || true; }
        if [[ $CG_KEEP_FILES == 1 ]]; then echo "callgrind files kept in $TMP" >&2; else rm -rf "$TMP"; fi
    }
    trap cleanup EXIT
}

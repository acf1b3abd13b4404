#!/usr/bin/env bash
# Bolide side by side with Redis Streams, NATS JetStream and RabbitMQ on this machine, 127.0.0.1
# only: the same produce, consume and e2e workloads, both flush modes, one table with the ratios
# Bolide / peer (bench/peers/README.md says what is measured and how).
#
#   bench/compare.sh [--quick] [--flush async|sync|both] [--peers redis,nats,rabbitmq]
#                    [--bolide-cmd "CMD"] [--spec "OPTIONS"] [--no-install] [--markdown]
#                    [--results FILE]
#
#   --quick       a smaller spec: the whole run in under 3 minutes (default: under 10)
#   --flush       flush modes to run (default both)
#   --peers       peers to run (default all three)
#   --bolide-cmd  how to run Bolide's side (default "$BOLIDE_BENCH" or ".venv/bin/bolide bench");
#                 called as CMD <produce|consume|e2e> <options from the spec>, see the README
#   --spec        extra spec options for every system, e.g. "--message-bytes 4096 --producers 2"
#   --no-install  do not run bench/peers/install.sh first
#   --markdown    print the table as Markdown (for docs/benchmarks.md)
#   --results     also keep the raw result lines (JSON, one per run) in FILE
#
# Every run is bounded (timeout); every server is started by bench/peers/run.py and stopped by
# it, and, should run.py be killed, by this script's EXIT trap (by the ids run.py noted).
set -uo pipefail
cd "$(dirname "$0")/.."

python=.venv/bin/python
quick=0
flushes="async sync"
peers="redis nats rabbitmq"
bolide_cmd="${BOLIDE_BENCH:-.venv/bin/bolide bench}"
spec_options=""
install=1
markdown=""
results_copy=""

while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --flush) shift; flushes="${1/both/async sync}" ;;
        --peers) shift; peers="${1//,/ }" ;;
        --bolide-cmd) shift; bolide_cmd="$1" ;;
        --spec) shift; spec_options="$1" ;;
        --no-install) install=0 ;;
        --markdown) markdown="--markdown" ;;
        --results) shift; results_copy="$1" ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

quick_flag=""
peer_limit_s=300      # warm-up + produce + consume + e2e + a RabbitMQ boot, full spec
bolide_limit_s=120    # one workload, full spec
if [ "$quick" = 1 ]; then
    quick_flag="--quick"
    peer_limit_s=90
    bolide_limit_s=60
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bolide-compare.XXXXXX")
results="$work/results.jsonl"
server_pids="$work/server-pids"
: >"$results"
: >"$server_pids"
child=""

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null # timeout passes it on; run.py then stops its server
        wait "$child" 2>/dev/null
    fi
    # servers noted as started and never as stopped: their run.py was killed
    local pid
    for pid in $(awk '$1 == "started" { s[$2] = 1 } $1 == "stopped" { delete s[$2] }
                      END { for (p in s) print p }' "$server_pids"); do
        echo "compare.sh: stopping leftover server group $pid" >&2
        kill -KILL -- "-$pid" 2>/dev/null
    done
    if [ -n "$results_copy" ]; then cp "$results" "$results_copy"; fi
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Runs "$@" bounded by $1 seconds (SIGTERM, then SIGKILL 30 s later) in the background, so that
# the traps above can run while we wait.
bounded() {
    local limit_s=$1
    shift
    echo "+ $*" >&2
    timeout --signal=TERM --kill-after=30 "$limit_s" "$@" &
    child=$!
    wait "$child"
    local status=$?
    child=""
    return "$status"
}

note() { echo "# $*" >>"$results"; echo "compare.sh: $*" >&2; }

started_s=$SECONDS
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$install" = 1 ]; then
    bash bench/peers/install.sh || { echo "compare.sh: install failed" >&2; exit 1; }
fi

bolide_ok=1
# shellcheck disable=SC2086  # $bolide_cmd is a command line: word splitting is meant
if ! $bolide_cmd --help >/dev/null 2>&1; then
    bolide_ok=0
    note "bolide bench not available yet ($bolide_cmd): Bolide's rows and the ratios are missing"
fi

for flush in $flushes; do
    # shellcheck disable=SC2086
    options=$("$python" -m bench.peers.run --bolide-args --flush "$flush" \
        $quick_flag $spec_options) || { echo "compare.sh: bad --spec" >&2; exit 2; }
    if [ "$bolide_ok" = 1 ]; then
        for workload in produce consume e2e; do
            output="$work/bolide-$workload-$flush.out"
            # shellcheck disable=SC2086
            if bounded "$bolide_limit_s" $bolide_cmd "$workload" $options >"$output"; then
                line=$(grep '^{' "$output" | tail -n 1)
                if [ -n "$line" ]; then echo "$line" >>"$results"; else
                    note "bolide $workload $flush printed no result line"; fi
            else
                note "bolide $workload $flush failed (exit $?)"
            fi
        done
    fi
    for peer in $peers; do
        # shellcheck disable=SC2086
        bounded "$peer_limit_s" "$python" -m bench.peers.run --peer "$peer" --flush "$flush" \
            $quick_flag $spec_options --pid-file "$server_pids" >>"$results"
        case $? in
            0) ;;
            3) note "$peer $flush unavailable here (see the message above)" ;;
            *) note "$peer $flush failed or was cut short" ;;
        esac
    done
done

echo
echo "Bolide vs peers on $(nproc) CPUs, $(uname -r), loopback only; load average (1/5/15 min)" \
    "$load_at_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo "spec: ${options:-?}"
"$python" -m bench.peers.table "$results" $markdown
# Issue 27's store goal (no peer: SYNC against Bolide's own ASYNC ceiling, same run)
goal_prefix=""
if [ -n "$markdown" ]; then goal_prefix="* "; fi
if store_goal=$(timeout --signal=TERM --kill-after=30 120 "$python" bench/store.py \
        --workloads sync --volume-mib 16 --fsyncs 200 --goal 2>/dev/null | grep '^goal'); then
    echo "$goal_prefix$store_goal (bench/store.py --workloads sync)"
else
    echo "${goal_prefix}goal store: bench/store.py --workloads sync failed"
fi
echo
echo "whole run: $((SECONDS - started_s)) s"

#!/usr/bin/env bash
# Seed 002's Fig. 9 on Courier: throughput and bytes transferred per call
# of plain AMs (outputs whole) against AMV(1.0) and AMV(0.8) (outputs
# packed), as the output grows from 10 % to 100 % of its maximum, for the
# remote search and the absolute values.
#
#   cargo build --release -p courier-apps --bin amv
#   bench/amv-fig9.sh                    # about 1.5 minutes on 2 cores
#   RUNS=3 ARGS="--calls 2000" bench/amv-fig9.sh
#
# Each point is one `amv --mode all` process (the three modes interleaved,
# run by run); the table has the median of RUNS runs per mode. Progress and
# the programs' full output go to standard error and to LOG_DIR; the
# markdown table goes to standard output. Exits non-zero if a run failed or
# a result failed verification.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
amv=${AMV:-$root/target/release/amv}
runs=${RUNS:-5}
ops=${OPS:-search absval}
percents=${PERCENTS:-10 20 30 40 50 60 70 80 90 100}
# Extra flags for every run (e.g. --calls, --segments, --credit-window).
read -r -a extra <<<"${ARGS:-}"
log_dir=${LOG_DIR:-$(mktemp -d -t amv-fig9.XXXXXX)}
mkdir -p "$log_dir"

if [[ ! -x $amv ]]; then
    echo "amv-fig9: no $amv; build it with: cargo build --release -p courier-apps --bin amv" >&2
    exit 1
fi

# The value of KEY= in a median line of MODE in LOG.
median_of() {
    local log=$1 mode=$2 key=$3
    grep "^amv: .* mode=$mode .* median " "$log" | tr ' ' '\n' | sed -n "s/^$key=//p"
}

start=$SECONDS
status=0
for op in $ops; do
    echo "### $op"
    echo
    echo "| percent | AM calls/s | AMV(1.0) calls/s | AMV(0.8) calls/s | AM bytes/call | AMV(1.0) bytes/call | AMV(0.8) bytes/call |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
    for p in $percents; do
        log=$log_dir/$op-$p.txt
        echo "amv-fig9: $op $p % ($((SECONDS - start)) s so far)" >&2
        if ! "$amv" --op "$op" --mode all --percent "$p" --runs "$runs" "${extra[@]}" >"$log" 2>&1; then
            echo "amv-fig9: $op $p % failed, see $log" >&2
            status=1
        fi
        row="| $p"
        for key in calls_per_s bytes_per_call; do
            for mode in am amv1 amv08; do
                row="$row | $(median_of "$log" "$mode" "$key")"
            done
        done
        echo "$row |"
    done
    echo
done
echo "amv-fig9: done in $((SECONDS - start)) s; logs in $log_dir" >&2
exit "$status"

#!/usr/bin/env bash
# Instructions per operation of histo (per update) or ig (per read), by
# callgrind: the marginal cost between a run and one three times larger,
# so that start-up cancels out. Needs valgrind.
#
#   bench/callgrind-per-op.sh histo 1                      # 1 locality (issue #11's figure)
#   bench/callgrind-per-op.sh histo 2 --credit-window off  # 2 localities in one process
#   bench/callgrind-per-op.sh ig 2
set -euo pipefail
app=${1:?histo or ig}
localities=${2:?number of localities}
shift 2
bin=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release}/$app
extra=()
case $app in
    histo)
        flag=--updates
        small=$((200000 * localities))
        # One locality: a long interval keeps its posts in full buffers.
        if [ "$localities" = 1 ]; then extra=(--coalescing count:interval_us=10000000); fi
        ;;
    ig) flag=--reads; small=200000 ;;
    *) echo "histo or ig, not $app" >&2; exit 2 ;;
esac
instructions() {
    local count=$1 log
    shift
    log=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" --localities "$localities" \
        --workers 1 --transport inproc "$flag" "$count" --runs 1 "${extra[@]}" "$@" >/dev/null 2>"$log"
    grep -o 'Collected : [0-9]*' "$log" | awk '{print $3}'
    rm -f "$log"
}
a=$(instructions "$small" "$@")
b=$(instructions $((3 * small)) "$@")
echo "$app, $localities localities: $(( (b - a) / (2 * small) / localities )) instructions per operation"

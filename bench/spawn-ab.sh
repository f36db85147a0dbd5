#!/usr/bin/env bash
# Side-by-side criterion runs of one spawn bench, interleaved: this tree's
# bench binary against the same bench built in another checkout (e.g. a
# `git worktree` of the commit before a change).
#
#   bench/spawn-ab.sh OTHER_CHECKOUT [BENCH_BINARY] [BENCH_NAME] [ROUNDS]
#   bench/spawn-ab.sh /work/wt-base spawn spawn_and_run_empty_task 5
#
# Prints, per round, the middle estimate of each side (ns), then the
# medians and their ratio (this tree / other).
set -euo pipefail
other=$1
binary=${2:-spawn}
name=${3:-spawn_and_run_empty_task}
rounds=${4:-5}
here=$(cd "$(dirname "$0")/.." && pwd)

exe() { # the bench executable of checkout $1
    (cd "$1" && cargo bench -p courier --bench "$binary" --no-run 2>&1) |
        sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1
}
a=$here/$(exe "$here")
b=$other/$(exe "$other")

run() { # middle estimate in ns
    (cd "$(dirname "$1")/../../.." && "$1" --bench "^$name\$" --warm-up-time 1 --measurement-time 3 2>&1) |
        sed -n 's/.*time: *\[[^ ]* [^ ]* \([0-9.]*\) \([a-zµ]*\) .*/\1 \2/p' |
        awk '{ v = $1; if ($2 == "µs" || $2 == "us") v *= 1000; print v }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: >/tmp/spawn-ab.here
: >/tmp/spawn-ab.other
for r in $(seq "$rounds"); do
    x=$(run "$a"); y=$(run "$b")
    echo "round $r: this $x ns, other $y ns"
    echo "$x" >>/tmp/spawn-ab.here
    echo "$y" >>/tmp/spawn-ab.other
done
mx=$(median </tmp/spawn-ab.here); my=$(median </tmp/spawn-ab.other)
echo "median: this $mx ns, other $my ns, ratio $(awk -v x="$mx" -v y="$my" 'BEGIN { printf "%.3f", x / y }')"

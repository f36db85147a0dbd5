#!/usr/bin/env bash
# Issue #13's figures (BENCHMARKS.md): floods and their peak memory, the
# cost of flow control on histo and ig (side by side, interleaved), and
# seed 002's Fig. 5 (latency of one segmented call, borrowing vs a hint).
# Build first: cargo build --release -p courier-apps. Prints raw lines;
# BENCHMARKS.md gives the medians. Takes about 12 minutes on 2 cores.
set -euo pipefail
bin=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
flood() { "$bin/flood" "$@" 2>/dev/null | grep '^flood:'; }

echo "== floods (default window 4 MiB, pool 16 MiB unless said)"
flood --posts 100000000 --handler-us 1
flood --posts 10000000 --handler-us 1 --credit-window off
flood --posts 10000000 --handler-us 1
flood --posts 300000 --handler-us 20 --coalescing off
flood --posts 300000 --handler-us 20 --coalescing off --credit-window off
flood --posts 3000000 --handler-us 20 --coalescing off
flood --posts 10000000 --handler-us 0 --mutual --callback
flood --posts 5000000 --handler-us 0 --mutual --callback --localities 4 --workers 1

echo "== histo and ig: flow control on (default) and off, interleaved"
for round in $(seq "${ROUNDS:-7}"); do
    for w in default off; do
        arg=(); [ "$w" = off ] && arg=(--credit-window off)
        h=$("$bin/histo" --updates 10000000 --runs 3 "${arg[@]}" 2>&1 | grep -o 'median mups_per_locality=[0-9.]*')
        i=$("$bin/ig" --runs 3 "${arg[@]}" 2>&1 | grep -o 'median mreads_per_locality=[0-9.]*')
        echo "round $round $w histo $h ig $i"
    done
done

echo "== Fig. 5: one search call (1 match per segment), window 8 KiB, pool 32 MiB"
for round in 1 2 3; do
    for segments in 50 100 200 400 800 1600 3200 6400; do
        for how in borrow hint; do
            arg=(); [ "$how" = hint ] && arg=(--credit-hint 33554432)
            l=$("$bin/amv" --op search --latency --mode amv08 --percent 10 --segments "$segments" \
                --repeat 30 --runs 1 --credit-window 8192 --credit-pool 33554432 "${arg[@]}" 2>&1 |
                grep -o 'median latency_us=[0-9.]*')
            echo "round $round segments $segments $how $l"
        done
    done
done

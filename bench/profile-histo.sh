#!/usr/bin/env bash
# Where the CPU of an update goes: histo on 2 localities (TCP unless
# --transport is given), every process sampled by perf (cpu-clock), the
# samples put into categories by symbol, and each category's CPU divided by
# the updates made. Only the timed region's work is counted: the symbols of
# drawing indices and of verification are reported apart.
#
#   bench/profile-histo.sh [-n UPDATES] [-o DIR] [-- extra histo options]
#
# Needs `perf` (Debian: linux-perf) and target/release/histo
# (`cargo build --release -p courier-apps`).
set -eu
N=20000000; OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) N=$2; shift 2;;
    -o) OUT=$2; shift 2;;
    --) shift; break;;
    -h|--help) sed -n '2,11p' "$0"; exit 0;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
cd "$(dirname "$0")/.."
OUT=${OUT:-target/profile-histo-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
perf record -q -e cpu-clock -F 4000 -o "$OUT/perf.data" -- \
  target/release/histo --updates "$N" --table 10000 --runs 1 "$@" 2>&1 | tee "$OUT/histo.log"
perf report -i "$OUT/perf.data" --no-children --sort sym --stdio -n -q 2>/dev/null > "$OUT/symbols.txt"
python3 - "$OUT/symbols.txt" "$N" <<'EOF' | tee "$OUT/categories.txt"
import re, sys
# First match wins; patterns are searched in the symbol's name.
CATEGORIES = [
    ("setup: drawing indices (not timed)", r"SplitMix64|spec_from_iter|from_iter"),
    ("page faults (mostly the index arrays, before timing)", r"clear_page|page_fault|anonymous_page|mm_fault|alloc_frozen_pages|memcg|lruvec|mem_cgroup|pte_offset|get_page_from_freelist|unmap_page_range|mas_walk"),
    ("send: the post loop (post and push inlined)", r"histo::main::\{\{closure\}\}::\{\{closure\}\}$"),
    ("malloc/free", r"malloc|free|_int_|realloc|cfree|tcache"),
    ("memcpy/memset", r"memcpy|memmove|memset"),
    ("send: post, buffer, encode", r"post|send_call|Aggregator|BiasedLock|FrameBuilder|encode|aggregate|frame::"),
    ("receive: decode, run the action", r"ParcelReader|run_calls|decode|receive|Sink|__courier_sync|histo_update|with_state|execute|type_id"),
    ("clock reads", r"quanta|Clock"),
    ("scheduler", r"sched|async_task|crossbeam|Worker|park|yield"),
    ("transport (user side)", r"tcp::|mio|Tcp|Incoming|transport"),
    ("kernel: syscalls, scheduling, network", r"\[k\]"),
]
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*([\d.]+)%\s+(\d+)\s+(\[.\])\s+(.*)", line)
    if m:
        rows.append((float(m.group(1)), int(m.group(2)), m.group(3) + " " + m.group(4).strip()))
total = sum(r[1] for r in rows)
updates = 2 * int(sys.argv[2])  # 2 localities
period_ns = 1e9 / 4000
by = {}
for pct, n, sym in rows:
    name = next((c for c, p in CATEGORIES if re.search(p, sym)), "other")
    by[name] = by.get(name, 0) + n
timed = sum(n for c, n in by.items() if not c.startswith("setup"))
print(f"{"category":55} {'share':>6} {'ns/update':>10}")
for c, n in sorted(by.items(), key=lambda kv: -kv[1]):
    print(f"{c:55} {100 * n / total:5.1f}% {n * period_ns / updates:10.1f}")
print(f"{"timed total (both processes)":55} {100 * timed / total:5.1f}% {timed * period_ns / updates:10.1f}")
EOF
echo "profile: $OUT (perf report -i $OUT/perf.data)" >&2

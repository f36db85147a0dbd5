#!/usr/bin/env bash
# Side by side: Courier's histo and ig against bale (jdevinney/bale, on
# OpenSHMEM) and YGM (LLNL/ygm, on MPI), 2 processes on this machine,
# interleaved round-robin, medians and ranges.
#
# This script builds nothing and contains no code of the peers: build them
# beforehand, outside this repository (BENCHMARKS.md says how they were
# built for the published figures), and give the directories of their
# binaries:
#
#   bench/peers/compare.sh --bale-bin DIR --ygm-bin DIR [-K runs] [-n N]
#
#   --bale-bin DIR   bale's build_oshmem/bin (histo, ig)
#   --ygm-bin DIR    histo and ig written on YGM's API (bale's definitions;
#                    sources and build.sh in bench/peers/ygm/;
#                    they print a `RESULT ... time_avg_s=T ... verify=OK` line)
#   -K N             rounds (default 5); each round runs every configuration once
#   -n N             updates or reads per process (default 10000000)
#   -T N             table entries per process (default 10000)
#   --only REGEX     only the configurations whose name matches
#   -o DIR           where logs and results.csv go (default target/peers-<date>)
#   --coalescing SPEC  also run Courier's kernels with `--coalescing SPEC`
#                    (repeatable; named courier-KERNEL-TRANSPORT@SPEC, commas
#                    in SPEC written as ';')
#
# Courier's binaries are target/release/{histo,ig}, built with
# `cargo build --release -p courier-apps --features mpi`. Rates are millions
# of operations per second per process: N over the slowest process's time
# from a barrier to a barrier (Courier, YGM), or N over bale's reported time.
# A process that runs its share at rate R spends 1/R of a core per
# operation, its sends and the receives it serves summed.
set -u

K=5; N=10000000; T=10000; ONLY=""; OUT=""; BALE=""; YGM=""; SPECS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bale-bin) BALE=$2; shift 2;;
    --ygm-bin) YGM=$2; shift 2;;
    -K) K=$2; shift 2;;
    -n) N=$2; shift 2;;
    -T) T=$2; shift 2;;
    --only) ONLY=$2; shift 2;;
    -o) OUT=$2; shift 2;;
    --coalescing) SPECS+=("$2"); shift 2;;
    -h|--help) sed -n '2,30p' "$0"; exit 0;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
cd "$(dirname "$0")/../.."
OUT=${OUT:-target/peers-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/logs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Shared memory and loopback TCP, every runtime pinned to loopback.
MPI="mpirun -np 2 --mca oob_tcp_if_include lo --mca pml ob1"
MPI_SHM="$MPI --mca btl vader,self"
MPI_TCP="$MPI --mca btl tcp,self --mca btl_tcp_if_include lo"
OSH="oshrun -np 2 --mca osc ^rdma --mca oob_tcp_if_include lo -x UCX_NET_DEVICES=lo"

CONFIGS=()
add() { # name kind command...
  local name=$1; shift
  if [ -n "$ONLY" ] && ! grep -Eq -- "$ONLY" <<<"$name"; then return; fi
  CONFIGS+=("$name|$*")
}
for kern in histo ig; do
  case $kern in histo) arg="--updates $N --table $T";; ig) arg="--reads $N --table $T";; esac
  add "courier-$kern-mpi" courier "$MPI_SHM target/release/$kern $arg --runs 1"
  add "courier-$kern-tcp" courier "target/release/$kern $arg --runs 1"
  for spec in "${SPECS[@]}"; do
    add "courier-$kern-mpi@${spec//,/;}" courier "$MPI_SHM target/release/$kern $arg --runs 1 --coalescing $spec"
    add "courier-$kern-tcp@${spec//,/;}" courier "target/release/$kern $arg --runs 1 --coalescing $spec"
  done
  if [ $kern = ig ]; then
    add "courier-ig-posts-mpi" courier "$MPI_SHM target/release/ig $arg --mode posts --runs 1"
    add "courier-ig-posts-tcp" courier "target/release/ig $arg --mode posts --runs 1"
  fi
  if [ -n "$BALE" ]; then
    for m in AGP:1 Exstack:2 Exstack2:4 Conveyor:8; do
      add "bale-$kern-${m%%:*}-shm" "bale:${m%%:*}" \
        "$OSH -x UCX_TLS=sm,self $BALE/$kern -n $N -T $T -M ${m##*:} -j @JSON@"
    done
    add "bale-$kern-Exstack-tcp" "bale:Exstack" \
      "$OSH -x UCX_TLS=tcp,self $BALE/$kern -n $N -T $T -M 2 -j @JSON@"
  fi
  if [ -n "$YGM" ]; then
    add "ygm-$kern-shm" ygm "$MPI_SHM $YGM/$kern -n $N -T $T"
    add "ygm-$kern-tcp" ygm "$MPI_TCP $YGM/$kern -n $N -T $T"
  fi
done
C=${#CONFIGS[@]}
[ "$C" -gt 0 ] || { echo "no configuration selected" >&2; exit 2; }
{
  echo "# compare.sh $(date -Is) K=$K N=$N T=$T courier=$(git rev-parse --short HEAD)"
  for c in "${CONFIGS[@]}"; do echo "# ${c%%|*}: ${c#*|}"; done
} | tee "$OUT/commands.txt"

CSV=$OUT/results.csv
echo "round,config,status,rate,wall_s,cpu_s" > "$CSV"
run_one() { # round index
  local r=$1 entry=${CONFIGS[$2]}
  local name=${entry%%|*} rest=${entry#*|}
  local kind=${rest%% *} cmd=${rest#* }
  local log=$OUT/logs/$name.r$r.log json=$OUT/logs/$name.r$r.json
  cmd=${cmd//@JSON@/$json}
  /usr/bin/time -f "%e %U %S" -o "$log.time" timeout 900 $cmd > "$log" 2>&1
  local rc=$? rate=NA status=OK
  [ $rc = 0 ] || status=EXIT$rc
  case $kind in
    courier)
      rate=$(sed -n 's/^run 1: .*_per_locality=\([0-9.]*\) wrong=0$/\1/p' "$log" | tail -1)
      [ -n "$rate" ] || { rate=NA; [ $status = OK ] && status=VERIFY_FAILED; } ;;
    bale:*)
      local t; t=$(grep -o "\"${kind#bale:}\": \"[0-9.]*\"" "$json" 2>/dev/null | grep -o '[0-9.]*' | tail -1)
      grep -Eq "FAIL|ERROR" "$log" && status=VERIFY_FAILED
      [ -n "$t" ] && rate=$(awk -v n="$N" -v t="$t" 'BEGIN{printf "%.3f", n/t/1e6}') ;;
    ygm)
      local line; line=$(grep '^RESULT' "$log" | tail -1)
      grep -q 'verify=OK' <<<"$line" || status=VERIFY_FAILED
      local t; t=$(sed -n 's/.*time_avg_s=\([0-9.]*\).*/\1/p' <<<"$line")
      [ -n "$t" ] && rate=$(awk -v n="$N" -v t="$t" 'BEGIN{printf "%.3f", n/t/1e6}') ;;
  esac
  read -r wall usr sys < <(tail -1 "$log.time")
  echo "$r,$name,$status,$rate,$wall,$(awk -v u="$usr" -v s="$sys" 'BEGIN{print u+s}')" >> "$CSV"
  printf '  [%d/%d] %-24s %-13s %s M ops/s/proc\n' "$r" "$K" "$name" "$status" "$rate" >&2
}
for ((r = 1; r <= K; r++)); do
  echo "round $r/$K" >&2
  for ((j = 0; j < C; j++)); do run_one "$r" $(( (j + r - 1) % C )); done
done

python3 - "$CSV" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows:
    by.setdefault(r["config"], []).append(r)
med = {}
print(f'{"config":26} {"ok":>5} {"median":>8}  {"[min, max]":19} M ops/s per process')
for name, rs in by.items():
    rates = [float(r["rate"]) for r in rs if r["status"] == "OK" and r["rate"] != "NA"]
    ok = f"{len(rates)}/{len(rs)}"
    if rates:
        med[name] = statistics.median(rates)
        print(f"{name:26} {ok:>5} {med[name]:8.2f}  [{min(rates):.2f}, {max(rates):.2f}]")
    else:
        print(f"{name:26} {ok:>5}        -  " + ",".join(sorted({r['status'] for r in rs})))
print()
for kern in ("histo", "ig"):
    ours = [n for n in med if n.startswith(f"courier-{kern}")]
    for o in ours:
        others = [n for n in med if n.startswith(("bale-" + kern + "-", "ygm-" + kern + "-"))]
        if others:
            print(f"{o}: " + ", ".join(f"{med[o] / med[n]:.2f}x {n}" for n in others))
EOF
echo "raw: $CSV  logs: $OUT/logs" >&2

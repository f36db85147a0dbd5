# Shared by bench/toy-ab.sh and bench/latency-ab.sh (sourced, not run):
# running a build's program and turning its phase lines into rows.

# The value of `NAME=` in a line, or nothing.
field() { grep -o "$1=[0-9.]*" <<<"$2" | cut -d= -f2 || true; }

# Runs a command; prints its standard output, or says which run failed,
# with its standard error, and stops the script.
run() {
    local err
    err=$(mktemp)
    if ! "$@" 2>"$err"; then
        echo "$(basename "$0"): failed: $*" >&2
        cat "$err" >&2
        rm -f "$err"
        exit 1
    fi
    rm -f "$err"
}

# Runs the toy's ten phases (batch, bursty, steady, sparse, awaits, twice)
# of build DIR under coalescing SPEC and prints one row a phase: CFG, the
# workload, its figure (mean µs from a call to its result, calls/s for
# batch) and the decisions adaptive coalescing made in it.
#   toy_rows CFG DIR SPEC
toy_rows() {
    local out line w v d
    out=$(run "$2/toy" --localities 2 --workload batch,bursty,steady,sparse,awaits \
        --parcels 400000 --phases 10 --coalescing "$3")
    grep -E '^phase' <<<"$out" | while read -r line; do
        w=$(grep -o 'workload=[a-z]*' <<<"$line" | cut -d= -f2)
        v=$(field latency_us "$line")
        [ -z "$v" ] && v=$(field calls_per_s "$line")
        d=$(grep -o ' decisions=[0-9]*' <<<"$line" | cut -d= -f2 || true)
        echo "$1 $w $v ${d:-0}"
    done
}

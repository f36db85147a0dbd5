#!/bin/sh
# Build the YGM peer kernels. Usage: build.sh YGM_CHECKOUT [OUTDIR]
set -e
YGM=${1:?usage: build.sh YGM_CHECKOUT [OUTDIR]}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${2:-$HERE/bin}
mkdir -p "$OUT"
for k in histo ig; do
  mpicxx -O3 -std=c++17 -pthread -I"$YGM/include" -I"$HERE" "$HERE/$k.cpp" -o "$OUT/$k"
done
echo "built: $OUT/histo $OUT/ig"

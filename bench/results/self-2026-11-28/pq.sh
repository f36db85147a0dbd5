rounds=$1; shift
for r in $(seq 1 $rounds); do for c in "$@"; do
  IFS='|' read -r name envs spec b <<< "$c"
  v=$(env $envs $b/parquet --nc 64 --iterations 5 --localities 2 --coalescing $spec 2>&1 | grep "^phase" | grep -o "seconds=[0-9.]*" | cut -d= -f2 | sort -n | sed -n 3p); echo "$name parquet $v"
done; done

b=/work/main/target/release
for r in $(seq 1 8); do for n in 4000000 40000000; do for c in adaptive count:num_parcels=16384,interval_us=10000 count:num_parcels=8192,interval_us=10000; do
v=$($b/histo --updates $n --runs 1 --coalescing $c 2>&1 | grep -o "mups_per_locality=[0-9.]*" | cut -d= -f2); echo "$n $c $v"
done; done; done

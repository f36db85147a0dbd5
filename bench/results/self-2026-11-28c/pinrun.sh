#!/bin/bash
# pinrun.sh MODE cmd...: runs cmd; MODE=pin pins courier-L-worker threads to CPU L%2 (split) or all to CPU 0 (same)
mode=$1; shift
"$@" &
pid=$!
if [ "$mode" != none ]; then
for i in $(seq 200); do
  n=0
  for t in /proc/[0-9]*/task/*; do
    c=$(cat $t/comm 2>/dev/null) || continue
    case "$c" in courier-*-worke*)
      l=${c#courier-}; l=${l%%-*}; tid=${t##*/}
      if [ "$mode" = split ]; then cpu=$((l % 2)); else cpu=$(( (l+1) % 2 )); fi
      taskset -p -c $cpu $tid >/dev/null 2>&1 && n=$((n+1));;
    esac
  done
  [ $n -ge 2 ] && break
  sleep 0.005
done
fi
wait $pid

B=${B:-/tmp/bin-m22}
for s in "$@"; do
  echo "== $s"
  $B/toy --workload bursty --phases 4 --coalescing $s $(for c in messages flush-answered flush-bypass flush-count flush-idle flush-split flush-timer flush-changed; do echo --print-counter /coalescing/count/$c@get_cplx; done) --print-counter /messages/count/sent 2>&1 | grep -v "^toy:" | sed -e 's/ wrong.*//' -e 's/,1,[0-9.]*,\[s\]//' | grep -v ",0$\|,0,\[" 
done

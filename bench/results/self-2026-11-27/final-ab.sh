cd /tmp/s20
bash ab2.sh 20 "main||adaptive|/tmp/bin-main" "final||adaptive|/tmp/bin-final" "c16k||count:num_parcels=16384,interval_us=10000|/tmp/bin-main" > final-ab.txt 2>&1
bash pq.sh 20 "main||adaptive|/tmp/bin-main" "final||adaptive|/tmp/bin-final" "c16k||count:num_parcels=16384,interval_us=10000|/tmp/bin-main" > final-pq.txt 2>&1

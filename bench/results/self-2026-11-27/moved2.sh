cd /tmp/s20
W="ig toy" bash ab2.sh 20 "main||adaptive|/tmp/bin-main" "moved||adaptive|/tmp/bin-moved" "c16k||count:num_parcels=16384,interval_us=10000|/tmp/bin-main" > moved-ab2.txt 2>&1
bash pq.sh 20 "main||adaptive|/tmp/bin-main" "moved||adaptive|/tmp/bin-moved" "c16k||count:num_parcels=16384,interval_us=10000|/tmp/bin-main" > moved-pq.txt 2>&1

// histo on YGM: each rank makes N random +1 updates to a distributed table of
// T entries per rank (cyclic: global g lives on rank g % P at local g / P).
// Indices are generated before the timed region; timed barrier to barrier;
// verified afterwards (global sum == N*P and exact replay of every rank's stream).
#include <ygm/comm.hpp>
#include <cstdio>
#include <vector>
#include "common.hpp"

using table_t = std::vector<int64_t>;

int main(int argc, char** argv) {
  ygm::comm world(&argc, &argv);
  const opts o = parse(argc, argv);
  const int P = world.size(), me = world.rank();
  const uint64_t G = (uint64_t)o.t * P;

  table_t table(o.t, 0);
  auto ptable = world.make_ygm_ptr(table);

  // generate indices before the timed region (stored as dest rank + local index)
  std::vector<int32_t> dest(o.n);
  std::vector<int64_t> lidx(o.n);
  {
    rng64 r(stream_seed(o.seed, me));
    for (long long i = 0; i < o.n; ++i) {
      uint64_t g = r.below(G);
      dest[i] = (int32_t)(g % P);
      lidx[i] = (int64_t)(g / P);
    }
  }

  auto inc = [](ygm::ygm_ptr<table_t> t, int64_t li) { (*t)[li] += 1; };

  world.barrier();
  double c0 = cpu_seconds_self();
  double t0 = MPI_Wtime();
  for (long long i = 0; i < o.n; ++i) world.async(dest[i], inc, ptable, lidx[i]);
  world.barrier();
  double t1 = MPI_Wtime();
  double c1 = cpu_seconds_self();

  // verification
  int64_t local_sum = 0;
  for (auto v : table) local_sum += v;
  int64_t sum = world.all_reduce_sum(local_sum);
  bool ok = (sum == (int64_t)o.n * P);
  table_t expect(o.t, 0);  // replay every rank's stream, keep entries that land here
  for (int r = 0; r < P; ++r) {
    rng64 rr(stream_seed(o.seed, r));
    for (long long i = 0; i < o.n; ++i) {
      uint64_t g = rr.below(G);
      if ((int)(g % P) == me) expect[g / P] += 1;
    }
  }
  int64_t bad = 0;
  for (long long j = 0; j < o.t; ++j) bad += (expect[j] != table[j]);
  bad = world.all_reduce_sum(bad);
  ok = ok && bad == 0;

  double dt = t1 - t0, cpu = c1 - c0;
  double tavg = world.all_reduce_sum(dt) / P, tmax = world.all_reduce_max(dt);
  double cpu_tot = world.all_reduce_sum(cpu);
  if (world.rank0()) {
    std::printf("RESULT kernel=histo impl=YGM P=%d N_per_rank=%lld T_per_rank=%lld "
                "time_avg_s=%.6f time_max_s=%.6f rate_Mops_per_proc=%.3f "
                "cpu_timed_s_all_ranks=%.6f cpu_ns_per_op=%.2f sum=%lld bad_entries=%lld verify=%s\n",
                P, o.n, o.t, tavg, tmax, o.n / tavg / 1e6, cpu_tot,
                cpu_tot / ((double)o.n * P) * 1e9, (long long)sum, (long long)bad, ok ? "OK" : "FAILED");
  }
  return ok ? 0 : 1;
}

// ig (index gather) on YGM: each rank has N random global indices into a
// distributed table of T entries per rank (cyclic layout, table[g] = -(g+1)).
// Each request is a YGM async to the owner, which replies with an async that
// writes the value into tgt[i] on the requester. Timed barrier to barrier;
// verified afterwards (tgt[i] == -(index[i]+1) for every i).
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

  table_t table(o.t);
  for (long long j = 0; j < o.t; ++j) table[j] = -((int64_t)j * P + me + 1);
  table_t tgt(o.n, 0);
  auto ptable = world.make_ygm_ptr(table);
  auto ptgt = world.make_ygm_ptr(tgt);

  std::vector<int64_t> index(o.n);
  std::vector<int32_t> dest(o.n);
  std::vector<int64_t> lidx(o.n);
  {
    rng64 r(stream_seed(o.seed, me));
    for (long long i = 0; i < o.n; ++i) {
      uint64_t g = r.below(G);
      index[i] = (int64_t)g;
      dest[i] = (int32_t)(g % P);
      lidx[i] = (int64_t)(g / P);
    }
  }

  auto reply = [](ygm::ygm_ptr<table_t> tg, int64_t i, int64_t v) { (*tg)[i] = v; };
  auto request = [reply](auto pcomm, ygm::ygm_ptr<table_t> t, ygm::ygm_ptr<table_t> tg,
                         int32_t from, int64_t li, int64_t i) {
    pcomm->async(from, reply, tg, i, (*t)[li]);
  };

  world.barrier();
  double c0 = cpu_seconds_self();
  double t0 = MPI_Wtime();
  for (long long i = 0; i < o.n; ++i)
    world.async(dest[i], request, ptable, ptgt, (int32_t)me, lidx[i], (int64_t)i);
  world.barrier();
  double t1 = MPI_Wtime();
  double c1 = cpu_seconds_self();

  int64_t bad = 0;
  for (long long i = 0; i < o.n; ++i) bad += (tgt[i] != -(index[i] + 1));
  bad = world.all_reduce_sum(bad);
  bool ok = bad == 0;

  double dt = t1 - t0, cpu = c1 - c0;
  double tavg = world.all_reduce_sum(dt) / P, tmax = world.all_reduce_max(dt);
  double cpu_tot = world.all_reduce_sum(cpu);
  if (world.rank0()) {
    std::printf("RESULT kernel=ig impl=YGM P=%d N_per_rank=%lld T_per_rank=%lld "
                "time_avg_s=%.6f time_max_s=%.6f rate_Mops_per_proc=%.3f "
                "cpu_timed_s_all_ranks=%.6f cpu_ns_per_op=%.2f bad=%lld verify=%s\n",
                P, o.n, o.t, tavg, tmax, o.n / tavg / 1e6, cpu_tot,
                cpu_tot / ((double)o.n * P) * 1e9, (long long)bad, ok ? "OK" : "FAILED");
  }
  return ok ? 0 : 1;
}

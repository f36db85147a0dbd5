// Shared helpers for the YGM peer kernels (histo, ig).
#pragma once
#include <sys/resource.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <mpi.h>

// splitmix64: small, fast, reproducible per-rank random stream.
struct rng64 {
  uint64_t s;
  explicit rng64(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // uniform in [0, n) (multiply-shift, no modulo bias worth mentioning)
  uint64_t below(uint64_t n) {
    return (uint64_t)(((unsigned __int128)next() * n) >> 64);
  }
};

inline uint64_t stream_seed(uint64_t seed, int rank) {
  return seed * 1000003ULL + 7919ULL * (uint64_t)(rank + 1);
}

inline double cpu_seconds_self() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
         ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

struct opts {
  long long n = 10000000;  // updates/requests per rank
  long long t = 10000;     // table entries per rank
  unsigned long long seed = 122222;
};

inline opts parse(int argc, char** argv) {
  opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](void) -> const char* {
      if (i + 1 >= argc) { std::fprintf(stderr, "missing value for %s\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "-n") o.n = std::atoll(val());
    else if (a == "-T") o.t = std::atoll(val());
    else if (a == "-s") o.seed = std::strtoull(val(), nullptr, 10);
    else { std::fprintf(stderr, "usage: %s [-n N_per_rank] [-T table_per_rank] [-s seed]\n", argv[0]); std::exit(2); }
  }
  return o;
}

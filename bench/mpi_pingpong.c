/* Raw MPI ping-pong between ranks 0 and 1: the per-message cost that
 * Courier's MPI transport is compared with (BENCHMARKS.md).
 *
 *   mpicc -O2 -o target/mpi_pingpong bench/mpi_pingpong.c
 *   mpirun -np 2 target/mpi_pingpong [ITERATIONS]
 *
 * Prints, per size, the median round trip in microseconds over ITERATIONS
 * round trips (default 5000) after 100 warm-up ones, then alpha and beta
 * fitted as pingpong does (one-way time, weighted by 1/t^2).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0) fprintf(stderr, "mpi_pingpong needs 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    int iterations = argc > 1 ? atoi(argv[1]) : 5000;
    size_t sizes[] = {8, 64, 512, 4096, 32768, 262144};
    int nsizes = sizeof sizes / sizeof sizes[0];
    char *buf = malloc(sizes[nsizes - 1]);
    double *t = malloc(sizeof(double) * iterations);
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    memset(buf, 7, sizes[nsizes - 1]);
    if (rank == 0) printf("%9s %13s\n", "bytes", "raw mpi us");
    for (int s = 0; s < nsizes; s++) {
        int n = (int)sizes[s];
        for (int i = -100; i < iterations; i++) {
            double start = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
            if (i >= 0) t[i] = MPI_Wtime() - start;
        }
        if (rank == 0) {
            qsort(t, iterations, sizeof(double), cmp);
            double rtt = t[iterations / 2];
            printf("%9d %13.2f\n", n, rtt * 1e6);
            double x = n, y = rtt / 2, w = 1 / (y * y);
            sw += w; sx += w * x; sy += w * y; sxx += w * x * x; sxy += w * x * y;
        }
    }
    if (rank == 0) {
        double beta = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
        double alpha = (sy - beta * sx) / sw;
        printf("raw mpi: alpha = %.3f us/message, beta = %.4f ns/byte\n", alpha * 1e6, beta * 1e9);
    }
    free(buf);
    free(t);
    MPI_Finalize();
    return 0;
}

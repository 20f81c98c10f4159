/* bench/pingpong.c: the bare-socket limit of request/response on one TCP connection, for
 * bench/bounceback. Two threads of one process over loopback: the client writes SIZE bytes and reads
 * SIZE back, the server reads SIZE and writes them back, TCP_NODELAY on both, for SECONDS. No
 * framing, no timestamps in the payload, no checks: what is left is the system calls and the
 * kernel's loopback path, which no tool can beat. Prints one JSON line: transactions, per second,
 * and the latency percentiles (ms) of every transaction (each timed with CLOCK_MONOTONIC).
 *
 *     cc -O2 -pthread -o pingpong bench/pingpong.c && ./pingpong SIZE SECONDS
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SAMPLES 50000000

static int size;

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int whole(int fd, char *buf, int n, int writing) {
    int done = 0;
    while (done < n) {
        ssize_t k = writing ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
        if (k <= 0) return -1;
        done += (int)k;
    }
    return 0;
}

static void *echo(void *arg) {
    int fd = *(int *)arg;
    char *buf = malloc(size);
    while (whole(fd, buf, size, 0) == 0 && whole(fd, buf, size, 1) == 0) {
    }
    close(fd);
    free(buf);
    return NULL;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: pingpong SIZE SECONDS\n");
        return 2;
    }
    size = atoi(argv[1]);
    double seconds = atof(argv[2]);
    if (size < 1 || seconds <= 0 || seconds > 600) return 2;
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1) ||
        getsockname(lfd, (struct sockaddr *)&a, &len))
        return 1;
    int cfd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(cfd, (struct sockaddr *)&a, sizeof a)) return 1;
    int sfd = accept(lfd, NULL, NULL);
    setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t th;
    pthread_create(&th, NULL, echo, &sfd);
    char *buf = calloc(1, size);
    uint64_t *lat = malloc(sizeof(uint64_t) * MAX_SAMPLES);
    uint64_t n = 0, t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), t = t0;
    while (t < end && n < MAX_SAMPLES) {
        uint64_t s = t;
        if (whole(cfd, buf, size, 1) || whole(cfd, buf, size, 0)) break;
        t = now_ns();
        lat[n++] = t - s;
    }
    double elapsed = (t - t0) / 1e9;
    shutdown(cfd, SHUT_RDWR);
    close(cfd);
    pthread_join(th, NULL);
    qsort(lat, n, sizeof *lat, cmp);
    double sum = 0;
    for (uint64_t k = 0; k < n; k++) sum += lat[k];
#define Q(q) (n ? lat[(uint64_t)((q) * (n - 1))] / 1e6 : 0.0)
    printf("{\"size\": %d, \"transactions\": %llu, \"elapsed_s\": %.6f, \"per_s\": %.1f, "
           "\"mean_ms\": %.6f, \"min_ms\": %.6f, \"p50_ms\": %.6f, \"p90_ms\": %.6f, "
           "\"p99_ms\": %.6f, \"p999_ms\": %.6f, \"max_ms\": %.6f}\n",
           size, (unsigned long long)n, elapsed, n / elapsed, n ? sum / n / 1e6 : 0.0, Q(0.0),
           Q(0.5), Q(0.9), Q(0.99), Q(0.999), Q(1.0));
    return 0;
}

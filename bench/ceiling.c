/* bench/ceiling: the simplest possible TCP send/recv loop on loopback, so every bench figure has a
 * ceiling to be read against. No payload work at all: the sender writes the same zeroed buffer, the
 * receiver reads into one buffer and counts bytes. One sender and one receiver thread per stream. With
 * one stream the sender is pinned to CPU 0 and the receiver to CPU 1; with more, threads are pinned
 * only when there are CPUs enough for every thread, else the kernel spreads them (pinning every sender
 * to one CPU and every receiver to another is slower than that on a small machine).
 *
 *   cc -O2 -pthread -o ceiling bench/ceiling.c
 *   ./ceiling [-t SECONDS] [-l WRITE_BYTES] [-P STREAMS] [-w WINDOW_BYTES] [-b PACE_BITS_PER_S]
 *             [-s LISTEN_NETNS -c CONNECT_NETNS -a LISTEN_ADDR]
 *
 * With -s, -c and -a (bench/peers --veth) the listening socket is made in network namespace
 * LISTEN_NETNS on LISTEN_ADDR and the sending sockets in CONNECT_NETNS (namespaces named by
 * `ip netns add`), so every byte crosses the veth pair between them; the threads stay in one process.
 *
 * Prints one JSON line: bytes received, seconds (first to last byte of the receivers), Gbit/s, and the
 * process's CPU seconds (both ends, user + system) per GB. Sends only to 127.0.0.1 (or, with -a, to
 * an address in a namespace the bench made), for at most SECONDS (<= 60). Written for landspeed's bench/peers; not part of the product.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_STREAMS 1024

static double seconds = 3.0;
static size_t length = 128 * 1024;
static int window = 0;
static uint64_t pace_bps = 0;
static atomic_int stop;
static const char *listen_ns, *connect_ns, *listen_addr;

struct end {
    int fd;
    int cpu;
    uint64_t bytes;
    double first, last;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void pin(int cpu) {
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *sender(void *arg) {
    struct end *e = arg;
    pin(e->cpu);
    char *buf = calloc(1, length);
    while (!atomic_load(&stop)) {
        ssize_t n = send(e->fd, buf, length, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        e->bytes += (uint64_t)n;
    }
    shutdown(e->fd, SHUT_WR);
    free(buf);
    return NULL;
}

static void *receiver(void *arg) {
    struct end *e = arg;
    pin(e->cpu);
    char *buf = malloc(length);
    for (;;) {
        ssize_t n = recv(e->fd, buf, length, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        double t = now();
        if (e->bytes == 0)
            e->first = t;
        e->last = t;
        e->bytes += (uint64_t)n;
    }
    free(buf);
    return NULL;
}

static void options(int fd) {
    if (window > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &window, sizeof window);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &window, sizeof window);
    }
}

static void args(int argc, char **argv, int *streams) {
    int c;
    while ((c = getopt(argc, argv, "t:l:P:w:b:s:c:a:")) != -1) {
        switch (c) {
        case 't': seconds = atof(optarg); break;
        case 'l': length = strtoull(optarg, NULL, 10); break;
        case 'P': *streams = atoi(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 'b': pace_bps = strtoull(optarg, NULL, 10); break;
        case 's': listen_ns = optarg; break;
        case 'c': connect_ns = optarg; break;
        case 'a': listen_addr = optarg; break;
        default:
            fprintf(stderr, "usage: ceiling [-t s] [-l bytes] [-P streams] [-w bytes] [-b bit/s] "
                            "[-s listen_netns -c connect_netns -a listen_addr]\n");
            exit(2);
        }
    }
    if (seconds <= 0 || seconds > 60 || length == 0 || length > (64 << 20) || *streams < 1 ||
        *streams > MAX_STREAMS) {
        fprintf(stderr, "ceiling: -t must be in (0, 60], -l in 1..64 MiB, -P in 1..%d\n", MAX_STREAMS);
        exit(2);
    }
}

/* Moves this thread into network namespace `name` (made by `ip netns add`); sockets made afterwards
 * belong to it, and stay there when the thread moves on. */
static void enter(const char *name) {
    if (!name)
        return;
    char path[256];
    snprintf(path, sizeof path, "/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET))
        die(path);
    close(fd);
}

/* A listening socket on 127.0.0.1 (or -a's address in -s's namespace) and an ephemeral port. */
static int listener(struct sockaddr_in *addr) {
    enter(listen_ns);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0)
        die("socket");
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listen_addr && inet_pton(AF_INET, listen_addr, &addr->sin_addr) != 1)
        die("-a");
    options(l);
    socklen_t len = sizeof *addr;
    if (bind(l, (struct sockaddr *)addr, len) || listen(l, MAX_STREAMS) ||
        getsockname(l, (struct sockaddr *)addr, &len))
        die("listen");
    return l;
}

/* Stream i's two connected ends. */
static void connect_pair(int l, struct sockaddr_in *addr, struct end *tx, struct end *rx) {
    tx->fd = socket(AF_INET, SOCK_STREAM, 0);
    options(tx->fd);
    if (pace_bps) {
        uint64_t rate = pace_bps / 8;
        setsockopt(tx->fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof rate);
    }
    if (connect(tx->fd, (struct sockaddr *)addr, sizeof *addr))
        die("connect");
    rx->fd = accept(l, NULL, NULL);
    if (rx->fd < 0)
        die("accept");
}

int main(int argc, char **argv) {
    int streams = 1;
    args(argc, argv, &streams);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct sockaddr_in addr;
    int l = listener(&addr);
    enter(connect_ns);
    static struct end tx[MAX_STREAMS], rx[MAX_STREAMS];
    pthread_t tt[MAX_STREAMS], rt[MAX_STREAMS];
    for (int i = 0; i < streams; i++) {
        connect_pair(l, &addr, &tx[i], &rx[i]);
        int pinned = streams == 1 || 2 * streams <= cpus;
        tx[i].cpu = pinned ? (int)((2 * i) % cpus) : -1;
        rx[i].cpu = pinned ? (int)((2 * i + 1) % cpus) : -1;
    }
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    for (int i = 0; i < streams; i++) {
        pthread_create(&rt[i], NULL, receiver, &rx[i]);
        pthread_create(&tt[i], NULL, sender, &tx[i]);
    }
    struct timespec nap = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&nap, NULL);
    atomic_store(&stop, 1);
    uint64_t bytes = 0;
    double first = 0, last = 0;
    for (int i = 0; i < streams; i++) {
        pthread_join(tt[i], NULL);
        pthread_join(rt[i], NULL);
        bytes += rx[i].bytes;
        if (first == 0 || rx[i].first < first)
            first = rx[i].first;
        if (rx[i].last > last)
            last = rx[i].last;
    }
    getrusage(RUSAGE_SELF, &after);
    double cpu = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
                 (after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6 +
                 (after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
                 (after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
    double span = last - first;
    printf("{\"streams\": %d, \"length\": %zu, \"bytes\": %llu, \"seconds\": %.6f, \"gbps\": %.3f, "
           "\"cpu_s\": %.3f, \"cpu_s_per_gb\": %.4f}\n",
           streams, length, (unsigned long long)bytes, span, span > 0 ? bytes * 8 / span / 1e9 : 0,
           cpu, bytes ? cpu / (bytes / 1e9) : 0);
    return 0;
}

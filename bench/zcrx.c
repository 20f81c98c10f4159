// bench/zcrx.c: does receive zero-copy pay on loopback? N sender/receiver pairs (threads) move
// data for T seconds over 127.0.0.1, each receiver touching every byte it gets (a sum, standing in
// for verification), in one of two modes:
//   copy: plain send() of 1 MiB / recv() into a 1 MiB buffer (what landspeed's receivers do);
//   zc:   send(MSG_ZEROCOPY) from page-aligned non-huge buffers, MSS clamped to 15 pages so every
//         loopback skb is whole pages, and the receiver maps them with TCP_ZEROCOPY_RECEIVE
//         (the kernel copies once, when loopback delivers the sender's pinned pages), copying only
//         what cannot be mapped.
// Prints Gbit/s in all, and for zc the share of bytes mapped. A probe for issue 33, not a product.
//   cc -O2 -pthread -o target/bench/zcrx bench/zcrx.c && target/bench/zcrx zc 8 3
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>
#include <linux/errqueue.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

#define CHUNK (1 << 20)
#define RING 16
static int zc_mode;
static double seconds;
static volatile int stop;
static uint64_t total_rx[256], mapped_rx[256];

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

struct pair { int tx, rx, id; };

// Reaps MSG_ZEROCOPY completions; returns the highest completed send id + 1 (or prev).
static uint32_t reap(int fd, uint32_t done) {
  char ctrl[128];
  for (;;) {
    struct msghdr m = {0};
    m.msg_control = ctrl;
    m.msg_controllen = sizeof ctrl;
    if (recvmsg(fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return done;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      struct sock_extended_err *e = (void *)CMSG_DATA(c);
      if (e->ee_origin == SO_EE_ORIGIN_ZEROCOPY && e->ee_data + 1 > done) done = e->ee_data + 1;
    }
  }
}

static void *sender(void *arg) {
  struct pair *p = arg;
  char *buf = mmap(NULL, (size_t)CHUNK * RING, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(buf, (size_t)CHUNK * RING, MADV_NOHUGEPAGE);
  memset(buf, p->id + 1, (size_t)CHUNK * RING);
  // Completion ids count the MSG_ZEROCOPY calls; a buffer is written again only once the last
  // call that sent from it has completed.
  uint32_t calls = 0, done = 0, chunk = 0, last_id[RING];
  int used[RING] = {0};
  while (!stop) {
    if (zc_mode) {
      int k = chunk % RING;
      while (used[k] && done <= last_id[k] && !stop) {
        struct pollfd f = {.fd = p->tx, .events = 0};
        poll(&f, 1, 10);
        done = reap(p->tx, done);
      }
      char *b = buf + (size_t)k * CHUNK;
      size_t off = 0;
      while (off < CHUNK && !stop) {
        ssize_t n = send(p->tx, b + off, CHUNK - off, MSG_ZEROCOPY);
        if (n <= 0) {
          if (errno == ENOBUFS) { done = reap(p->tx, done); continue; }
          return NULL;
        }
        off += n;
        last_id[k] = calls++;
      }
      used[k] = 1;
      chunk++;
      done = reap(p->tx, done);
    } else {
      ssize_t n = send(p->tx, buf, CHUNK, 0);
      if (n <= 0) return NULL;
    }
  }
  shutdown(p->tx, SHUT_WR);
  return NULL;
}

static uint64_t touch(const char *p, size_t n) {
  const uint64_t *q = (const uint64_t *)p;
  uint64_t s = 0;
  for (size_t i = 0; i < n / 8; i++) s += q[i];
  for (size_t i = n & ~(size_t)7; i < n; i++) s += (unsigned char)p[i];
  return s;
}

static void *receiver(void *arg) {
  struct pair *p = arg;
  static __thread uint64_t sink;
  char *copy = malloc(CHUNK);
  char *map = NULL;
  if (zc_mode) {
    int lowat = getenv("LOWAT") ? atoi(getenv("LOWAT")) : 0;
    if (lowat) setsockopt(p->rx, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
    map = mmap(NULL, 2 * CHUNK, PROT_READ, MAP_SHARED, p->rx, 0);
    if (map == MAP_FAILED) { perror("mmap"); map = NULL; }
  }
  for (;;) {
    if (map) {
      struct tcp_zerocopy_receive z = {0};
      socklen_t zl = sizeof z;
      z.address = (uint64_t)map;
      z.length = 2 * CHUNK;
      z.copybuf_address = (uint64_t)copy;
      z.copybuf_len = CHUNK;
      if (getsockopt(p->rx, IPPROTO_TCP, TCP_ZEROCOPY_RECEIVE, &z, &zl) < 0) { perror("zc"); break; }
      if (z.length) { sink += touch(map, z.length); mapped_rx[p->id] += z.length; total_rx[p->id] += z.length; }
      if (z.copybuf_len > 0) { sink += touch(copy, z.copybuf_len); total_rx[p->id] += z.copybuf_len; }
      if (z.recv_skip_hint) {
        ssize_t n = recv(p->rx, copy, z.recv_skip_hint < CHUNK ? z.recv_skip_hint : CHUNK, 0);
        if (n <= 0) break;
        sink += touch(copy, n);
        total_rx[p->id] += n;
      }
      if (!z.length && z.copybuf_len <= 0 && !z.recv_skip_hint) {
        // Nothing ready: wait for data with a plain blocking peek.
        char c;
        if (recv(p->rx, &c, 1, MSG_PEEK) <= 0) break;
      }
    } else {
      ssize_t n = recv(p->rx, copy, CHUNK, 0);
      if (n <= 0) break;
      sink += touch(copy, n);
      total_rx[p->id] += n;
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: zcrx copy|zc STREAMS SECONDS\n"); return 2; }
  zc_mode = strcmp(argv[1], "zc") == 0;
  int n = atoi(argv[2]);
  seconds = atof(argv[3]);
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int mss = 15 * 4096 + 12; // 15 pages of payload after the timestamp option
  if (zc_mode) setsockopt(l, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
  bind(l, (void *)&a, sizeof a);
  socklen_t al = sizeof a;
  getsockname(l, (void *)&a, &al);
  listen(l, 256);
  struct pair *ps = calloc(n, sizeof *ps);
  pthread_t *th = calloc(2 * n, sizeof *th);
  for (int i = 0; i < n; i++) {
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (zc_mode) { setsockopt(c, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one); setsockopt(c, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss); }
    connect(c, (void *)&a, sizeof a);
    ps[i] = (struct pair){.tx = c, .rx = accept(l, NULL, NULL), .id = i};
  }
  double t0 = now_s();
  for (int i = 0; i < n; i++) {
    pthread_create(&th[2 * i], NULL, sender, &ps[i]);
    pthread_create(&th[2 * i + 1], NULL, receiver, &ps[i]);
  }
  struct timespec d = {.tv_sec = (time_t)seconds, .tv_nsec = (long)((seconds - (time_t)seconds) * 1e9)};
  nanosleep(&d, NULL);
  uint64_t bytes = 0, mapped = 0;
  for (int i = 0; i < n; i++) { bytes += total_rx[i]; mapped += mapped_rx[i]; }
  double t = now_s() - t0;
  stop = 1;
  for (int i = 0; i < n; i++) { shutdown(ps[i].tx, SHUT_RDWR); shutdown(ps[i].rx, SHUT_RDWR); }
  for (int i = 0; i < 2 * n; i++) pthread_join(th[i], NULL);
  printf("%s %d streams: %.2f Gbit/s, mapped %.1f%%\n", argv[1], n, bytes * 8 / t / 1e9,
         bytes ? 100.0 * mapped / bytes : 0.0);
  return 0;
}

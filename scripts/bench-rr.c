/* bench-rr: request/reply round trips through eventbusd, nats-server and a
 * D-Bus bus, the same two roles in C for all three (docs/BENCHMARKS.md,
 * "Case 11: request/reply"; issue 32).
 *
 * Usage: bench-rr serve --proto P --socket ADDR
 *        bench-rr ask --proto P --socket ADDR [--inflight N] [--seconds S]
 * P is eventbus (NDJSON, PROTOCOL.md "Request/reply (1.3)"), nats (the
 * client protocol: PUB with a reply subject, one wildcard inbox
 * subscription, as the NATS clients' request muxer) or dbus (sd-bus method
 * calls through the bus at ADDR, a `unix:path=` address). ADDR for nats is
 * tcp:127.0.0.1:PORT.
 * - serve: answers every request of `bench.rr` (NATS subject `bench.rr`,
 *   D-Bus `org.eventbus.BenchRR` method `Echo`) with the same fixed 16-byte
 *   payload, batching the answers of one read into one write; prints `ready`
 *   once the broker confirmed it serves.
 * - ask: keeps N requests in flight (1: one at a time) for S seconds, each
 *   with a 16-byte payload, then waits up to 5 s for the last answers;
 *   prints `sent= answered= lost= seconds= rate= p50_us= p99_us=` (latency
 *   from write to answer read, CLOCK_MONOTONIC; rate = answers per second).
 *
 * Before editing: keep it the obvious client (no tuning a peer lacks): one
 * connection each, big reads, answers of one read written at once.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_SDBUS
#include <systemd/sd-bus.h>
#endif

#define READ_SIZE (256 * 1024)
#define MAX_INFLIGHT 1024
#define PAYLOAD "\"0123456789abcd\"" /* 16 bytes, a JSON string */

enum proto { EVENTBUS, NATS, DBUS };
static enum proto proto;
static const char *address;

#define BENCH_NAME "bench-rr"
#include "bench-net.h"





/* A connection's unread bytes. */
struct conn { int fd; char *buf; size_t used; };

/* Reads once (blocking up to `ms`); 0 on timeout. Dies on close. */
static int fill(struct conn *c, int ms) {
    struct pollfd q = { c->fd, POLLIN, 0 };
    if (poll(&q, 1, ms) <= 0) return 0;
    ssize_t n = read(c->fd, c->buf + c->used, READ_SIZE - c->used);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
    if (n <= 0) die("broker closed the connection");
    c->used += (size_t)n;
    if (c->used == READ_SIZE) { errno = 0; die("a frame longer than the buffer"); }
    return 1;
}

static void consume(struct conn *c, size_t k) { memmove(c->buf, c->buf + k, c->used - k); c->used -= k; }

/* Set-up only: reads until `needle` arrived (10 s at most), drops what came before it. */
static void expect(struct conn *c, const char *needle) {
    long long deadline = now_ns() + 10000000000LL;
    for (;;) {
        char *at = memmem(c->buf, c->used, needle, strlen(needle));
        if (at) { consume(c, (size_t)(at - c->buf) + strlen(needle)); return; }
        if (memmem(c->buf, c->used, "\"op\":\"error\"", 12) || memmem(c->buf, c->used, "-ERR", 4)) {
            errno = 0; fprintf(stderr, "bench-rr: %.*s\n", (int)c->used, c->buf); die("refused");
        }
        if (now_ns() > deadline) { errno = 0; die("timed out in set-up"); }
        fill(c, 1000);
    }
}

static struct conn open_conn(void) {
    struct conn c = { connect_broker(), malloc(READ_SIZE), 0 };
    if (!c.buf) die("malloc");
    if (proto == NATS) {
        static const char hello[] = "CONNECT {\"verbose\":false,\"pedantic\":false,\"echo\":false,\"name\":\"bench-rr\",\"lang\":\"c\",\"version\":\"1.0\"}\r\nPING\r\n";
        expect(&c, "INFO ");
        write_all(c.fd, hello, sizeof hello - 1);
        expect(&c, "PONG\r\n");
    }
    return c;
}

/* ---- serve --------------------------------------------------------------- */

static _Noreturn void serve_stream(void) {
    struct conn c = open_conn();
    if (proto == EVENTBUS) {
        static const char sub[] = "{\"op\":\"subscribe\",\"type\":\"bench.rr\",\"serve\":true,\"req\":\"s\"}\n";
        write_all(c.fd, sub, sizeof sub - 1);
        expect(&c, "\"serve\":true");
        expect(&c, "\n");
    } else {
        static const char sub[] = "SUB bench.rr 1\r\nPING\r\n";
        write_all(c.fd, sub, sizeof sub - 1);
        expect(&c, "PONG\r\n");
    }
    printf("ready\n");
    fflush(stdout);
    char *out = malloc(READ_SIZE);
    for (;;) {
        fill(&c, -1);
        size_t o = 0;
        char *p = c.buf, *end = c.buf + c.used;
        for (;;) {
            char *lf = memchr(p, '\n', (size_t)(end - p));
            if (!lf) break;
            if (proto == EVENTBUS) {
                /* {"op":"request",...,"reply":"<32 hex>","timeout":N} */
                char *r = memmem(p, (size_t)(lf - p), "\"reply\":\"", 9);
                if (r && lf - p > 15 && memcmp(p, "{\"op\":\"request\"", 15) == 0) {
                    if (o + 128 > READ_SIZE) { write_all(c.fd, out, o); o = 0; }
                    o += (size_t)sprintf(out + o, "{\"op\":\"reply\",\"to\":\"%.32s\",\"data\":" PAYLOAD "}\n", r + 9);
                }
                p = lf + 1;
                continue;
            }
            /* MSG <subject> <sid> [reply-to] <#bytes>\r\n<payload>\r\n */
            if (lf - p >= 4 && memcmp(p, "MSG ", 4) == 0) {
                char subject[256], sid[32], reply[256];
                long long bytes = 0;
                int n = sscanf(p, "MSG %255s %31s %255s %lld", subject, sid, reply, &bytes);
                if (n != 4) { errno = 0; die("a request without a reply subject"); }
                if (lf + 1 + bytes + 2 > end) break;
                if (o + 512 > READ_SIZE) { write_all(c.fd, out, o); o = 0; }
                o += (size_t)sprintf(out + o, "PUB %s %d\r\n" PAYLOAD "\r\n", reply, (int)sizeof PAYLOAD - 1);
                p = lf + 1 + bytes + 2;
                continue;
            }
            if (lf - p >= 4 && memcmp(p, "PING", 4) == 0) { memcpy(out + o, "PONG\r\n", 6); o += 6; }
            p = lf + 1;
        }
        if (o) write_all(c.fd, out, o);
        consume(&c, (size_t)(p - c.buf));
    }
}

/* ---- ask ----------------------------------------------------------------- */

static long long *latencies;
static size_t latency_count, latency_capacity;
static long long sent_at[MAX_INFLIGHT];
static unsigned long long sent, answered, failed;

static void record(long long ns) {
    if (latency_count == latency_capacity) {
        latency_capacity = latency_capacity ? latency_capacity * 2 : 1 << 16;
        latencies = realloc(latencies, latency_capacity * sizeof *latencies);
        if (!latencies) die("realloc");
    }
    latencies[latency_count++] = ns;
}

static int compare(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static void report(double seconds) {
    qsort(latencies, latency_count, sizeof *latencies, compare);
    long long p50 = latency_count ? latencies[latency_count / 2] : 0;
    long long p99 = latency_count ? latencies[latency_count * 99 / 100] : 0;
    printf("sent=%llu answered=%llu lost=%llu seconds=%.3f rate=%.0f p50_us=%.1f p99_us=%.1f\n",
           sent, answered, sent - answered, seconds, answered / seconds, p50 / 1000.0, p99 / 1000.0);
    fflush(stdout);
}

/* Writes request number `slot` (its slot among those in flight) into `out`. */
static size_t request_frame(char *out, int slot) {
    if (proto == EVENTBUS)
        return (size_t)sprintf(out, "{\"op\":\"request\",\"type\":\"bench.rr\",\"data\":" PAYLOAD ",\"req\":%d}\n", slot);
    return (size_t)sprintf(out, "PUB bench.rr _INBOX.rr.%d %d\r\n" PAYLOAD "\r\n", slot, (int)sizeof PAYLOAD - 1);
}

static int ask_stream(int inflight, double seconds) {
    struct conn c = open_conn();
    if (proto == NATS) {
        static const char sub[] = "SUB _INBOX.rr.* 1\r\nPING\r\n";
        write_all(c.fd, sub, sizeof sub - 1);
        expect(&c, "PONG\r\n");
    }
    char *out = malloc((size_t)inflight * 256 + 64);
    long long start = now_ns(), stop = start + (long long)(seconds * 1e9), last = start;
    size_t o = 0;
    long long t = now_ns();
    for (int i = 0; i < inflight; i++) { o += request_frame(out + o, i); sent_at[i] = t; sent++; }
    write_all(c.fd, out, o);
    unsigned long long outstanding = (unsigned long long)inflight;
    int stopping = 0;
    while (outstanding) {
        long long now = now_ns();
        if (!stopping && now >= stop) stopping = 1;
        if (stopping && now >= stop + 5000000000LL) break;
        if (!fill(&c, 1000)) continue;
        long long got = now_ns();
        o = 0;
        char *p = c.buf, *end = c.buf + c.used;
        for (;;) {
            char *lf = memchr(p, '\n', (size_t)(end - p));
            if (!lf) break;
            int slot = -1, ok = 0;
            char *next = lf + 1;
            if (proto == EVENTBUS) {
                /* {"op":"ok","req":N,...} or {"op":"error","req":N,...} */
                char *r = memmem(p, (size_t)(lf - p), "\"req\":", 6);
                if (r && r < lf) slot = atoi(r + 6);
                ok = memcmp(p, "{\"op\":\"ok\"", 10) == 0;
                if (!ok) fprintf(stderr, "bench-rr: %.*s\n", (int)(lf - p), p);
            } else if (lf - p >= 4 && memcmp(p, "MSG ", 4) == 0) {
                char *d = lf - 1;
                long long bytes = 0, scale = 1;
                while (d > p + 3 && d[-1] >= '0' && d[-1] <= '9') { bytes += (d[-1] - '0') * scale; scale *= 10; d--; }
                if (lf + 1 + bytes + 2 > end) break;
                char *s = memmem(p, (size_t)(lf - p), "_INBOX.rr.", 10);
                if (s) slot = atoi(s + 10);
                ok = 1;
                next = lf + 1 + bytes + 2;
            } else if (lf - p >= 4 && memcmp(p, "PING", 4) == 0) {
                memcpy(out + o, "PONG\r\n", 6); o += 6;
            }
            p = next;
            if (slot < 0 || slot >= inflight) continue;
            outstanding--;
            if (ok) { answered++; record(got - sent_at[slot]); last = got; } else failed++;
            if (!stopping) { o += request_frame(out + o, slot); sent_at[slot] = got; sent++; outstanding++; }
        }
        consume(&c, (size_t)(p - c.buf));
        if (o) write_all(c.fd, out, o);
    }
    report((last - start) / 1e9);
    return 0;
}

#ifdef WITH_SDBUS
/* ---- D-Bus (sd-bus) -------------------------------------------------------- */

static sd_bus *open_bus(void) {
    sd_bus *bus = NULL;
    int r;
    if ((r = sd_bus_new(&bus)) < 0 || (r = sd_bus_set_address(bus, address)) < 0 || (r = sd_bus_set_bus_client(bus, 1)) < 0 ||
        (r = sd_bus_start(bus)) < 0) { errno = -r; die("sd-bus connect"); }
    return bus;
}

static int method_echo(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata; (void)error;
    const char *s;
    int r = sd_bus_message_read(m, "s", &s);
    if (r < 0) return r;
    return sd_bus_reply_method_return(m, "s", "0123456789abcd");
}

static const sd_bus_vtable vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Echo", "s", "s", method_echo, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END
};

static _Noreturn void serve_dbus(void) {
    sd_bus *bus = open_bus();
    int r;
    if ((r = sd_bus_add_object_vtable(bus, NULL, "/org/eventbus/BenchRR", "org.eventbus.BenchRR", vtable, NULL)) < 0) { errno = -r; die("vtable"); }
    if ((r = sd_bus_request_name(bus, "org.eventbus.BenchRR", 0)) < 0) { errno = -r; die("request name"); }
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) { errno = -r; die("process"); }
        if (r > 0) continue;
        if ((r = sd_bus_wait(bus, (uint64_t)-1)) < 0 && r != -EINTR) { errno = -r; die("wait"); }
    }
}

static sd_bus *ask_bus;
static int stopping_dbus;
static unsigned long long outstanding_dbus;
static long long last_dbus;

static int send_call(int slot);

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    int slot = (int)(long)userdata;
    long long got = now_ns();
    outstanding_dbus--;
    if (sd_bus_message_is_method_error(m, NULL)) failed++;
    else { answered++; record(got - sent_at[slot]); last_dbus = got; }
    if (!stopping_dbus) send_call(slot);
    return 0;
}

static int send_call(int slot) {
    sent_at[slot] = now_ns();
    int r = sd_bus_call_method_async(ask_bus, NULL, "org.eventbus.BenchRR", "/org/eventbus/BenchRR", "org.eventbus.BenchRR", "Echo",
                                     on_reply, (void *)(long)slot, "s", "0123456789abcd");
    if (r < 0) { errno = -r; die("call"); }
    sent++;
    outstanding_dbus++;
    return r;
}

static int ask_dbus(int inflight, double seconds) {
    ask_bus = open_bus();
    long long start = now_ns(), stop = start + (long long)(seconds * 1e9);
    last_dbus = start;
    for (int i = 0; i < inflight; i++) send_call(i);
    while (outstanding_dbus) {
        long long now = now_ns();
        if (!stopping_dbus && now >= stop) stopping_dbus = 1;
        if (stopping_dbus && now >= stop + 5000000000LL) break;
        int r = sd_bus_process(ask_bus, NULL);
        if (r < 0) { errno = -r; die("process"); }
        if (r > 0) continue;
        if ((r = sd_bus_wait(ask_bus, 1000000)) < 0 && r != -EINTR) { errno = -r; die("wait"); }
    }
    report((last_dbus - start) / 1e9);
    return 0;
}
#endif

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) { fprintf(stderr, "usage: bench-rr serve|ask --proto P --socket ADDR [--inflight N] [--seconds S]\n"); return 64; }
    const char *proto_name = NULL;
    int inflight = 1;
    double seconds = 2;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--proto")) proto_name = v;
        else if (!strcmp(k, "--socket")) address = v;
        else if (!strcmp(k, "--inflight")) inflight = atoi(v);
        else if (!strcmp(k, "--seconds")) seconds = atof(v);
        else { fprintf(stderr, "bench-rr: unknown option %s\n", k); return 64; }
    }
    if (!proto_name || !address) { fprintf(stderr, "bench-rr: --proto and --socket are needed\n"); return 64; }
    if (inflight < 1 || inflight > MAX_INFLIGHT) { fprintf(stderr, "bench-rr: --inflight 1..%d\n", MAX_INFLIGHT); return 64; }
    if (!strcmp(proto_name, "eventbus")) proto = EVENTBUS;
    else if (!strcmp(proto_name, "nats")) proto = NATS;
    else if (!strcmp(proto_name, "dbus")) proto = DBUS;
    else { fprintf(stderr, "bench-rr: no %s (eventbus, nats, dbus)\n", proto_name); return 64; }
#ifndef WITH_SDBUS
    if (proto == DBUS) { fprintf(stderr, "bench-rr: built without sd-bus (-DWITH_SDBUS -lsystemd)\n"); return 69; }
#endif
    if (!strcmp(argv[1], "serve")) {
#ifdef WITH_SDBUS
        if (proto == DBUS) serve_dbus();
#endif
        serve_stream();
    }
    if (!strcmp(argv[1], "ask")) {
#ifdef WITH_SDBUS
        if (proto == DBUS) return ask_dbus(inflight, seconds);
#endif
        return ask_stream(inflight, seconds);
    }
    fprintf(stderr, "bench-rr: unknown role %s\n", argv[1]);
    return 64;
}

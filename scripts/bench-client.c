/* bench-client: a minimal raw-socket load generator in C, the yardstick for
 * eventbus-bench's own publisher and subscriber (docs/BENCHMARKS.md,
 * "Harness fairness"; issue 24).
 *
 * Usage: bench-client sub --proto P --socket ADDR [--type T] [--live N]
 *        bench-client pub --proto P --socket ADDR [--type T] [--payload N]
 *                         [--seconds S] [--count N]
 * P is nats, redis, mqtt (3.1.1, QoS 0), eventbus or relay; ADDR a Unix socket path or
 * tcp:127.0.0.1:PORT. Other options of eventbus-bench's roles are ignored.
 *
 * It plays the same two roles as `eventbus-bench sub` and `eventbus-bench
 * pub`, with the same control lines and result keys, so `eventbus-bench run
 * CASE --client PATH` drives it exactly as it drives its own roles:
 * - sub: opens N connections, subscribes each (and waits for the broker's
 *   answer to a ping after it), prints `ready`; then reads each connection
 *   with one 256 KiB read per wake-up and counts deliveries without parsing
 *   anything but lengths; on `drain` prints `idle` once nothing arrived for
 *   300 ms; on `result` prints `events= dropped= ... t_first= t_last=
 *   cpu_us=` and exits.
 * - pub: floods one prebuilt 64 KiB buffer of identical publish frames on a
 *   non-blocking socket (poll for POLLOUT, replies read and discarded when
 *   POLLIN), ends on a frame boundary after S seconds or N frames, sends the
 *   protocol's ping and waits for its answer, prints `sent= t_start= t_end=
 *   t_synced= errors=0 cpu_us=`.
 * cpu_us is utime+stime from /proc/self/stat, as for eventbus-bench.
 *
 * Before editing: keep it the obvious fast client (big writes, big reads,
 * count by lengths), not a tuned one: it is the reference a reader can
 * check at a glance.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
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
#include <fcntl.h>

#define READ_SIZE (256 * 1024)
#define CHUNK (64 * 1024)
#define MAX_SUBS 64

enum proto { NATS, REDIS, MQTT, EVENTBUS, RELAY };
static enum proto proto;
static const char *address, *type = "bench.t";

#define BENCH_NAME "bench-client"
#include "bench-net.h"



static long long cpu_us(void) {
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0) close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return 0;
    return (long long)((ut + st) * 1000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK));
}



/* Reads (blocking, 10 s at most) until the `nl` bytes at `needle` have arrived; set-up only. */
static void read_until_bytes(int fd, const char *needle, size_t nl) {
    static char buf[1 << 16];
    size_t used = 0;
    long long deadline = now_ns() + 10000000000LL;
    for (;;) {
        buf[used] = 0;
        if (memmem(buf, used, needle, nl)) return;
        if (proto != MQTT && memmem(buf, used, "-ERR", 4)) { errno = 0; fprintf(stderr, "bench-client: %s\n", buf); die("refused"); }
        if (used > sizeof buf / 2) { memmove(buf, buf + used / 2, used - used / 2); used -= used / 2; }
        struct pollfd q = { fd, POLLIN, 0 };
        if (now_ns() > deadline) { errno = 0; die("timed out in set-up"); }
        if (poll(&q, 1, 1000) <= 0) continue;
        ssize_t n = read(fd, buf + used, sizeof buf - 1 - used);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die("closed in set-up");
        used += (size_t)n;
    }
}

static void read_until(int fd, const char *needle) { read_until_bytes(fd, needle, strlen(needle)); }

/* MQTT: `*out` gets the remaining-length bytes of `n`; returns their count. */
static int mqtt_length(char *out, size_t n) {
    int k = 0;
    do { out[k] = (char)(n & 0x7F); n >>= 7; if (n) out[k] |= (char)0x80; k++; } while (n);
    return k;
}

/* The MQTT topic of an eventbus type: dots become slashes (`bench.t` -> `bench/t`). */
static void mqtt_topic(char *out) {
    size_t i = 0;
    for (; type[i] && i < 200; i++) out[i] = type[i] == '.' ? '/' : type[i];
    out[i] = 0;
}

static const char *nats_connect =
    "CONNECT {\"verbose\":false,\"pedantic\":false,\"echo\":false,\"name\":\"bench-client\",\"lang\":\"c\",\"version\":\"1.0\"}\r\n"
    "PING\r\n";

struct bytes { const char *p; size_t n; };
#define BYTES(literal) ((struct bytes){ literal, sizeof literal - 1 })

/* The protocol's ping, answered after every earlier request; none for the relay. */
static struct bytes sync_request(void) {
    switch (proto) {
    case NATS: return BYTES("PING\r\n");
    case REDIS: return BYTES("*1\r\n$4\r\nPING\r\n");
    case EVENTBUS: return BYTES("{\"op\":\"ping\",\"req\":\"sync\"}\n");
    case MQTT: return BYTES("\xC0\x00"); /* PINGREQ */
    default: return BYTES("");
    }
}

/* What the answer to sync_request contains (redis: `pong` when subscribed; the relay: its OK to SUB). */
static struct bytes sync_reply(int subscribed) {
    switch (proto) {
    case NATS: return BYTES("PONG\r\n");
    case REDIS: return subscribed ? BYTES("pong") : BYTES("+PONG\r\n");
    case EVENTBUS: return BYTES("\"op\":\"ok\"");
    case MQTT: return BYTES("\xD0\x00"); /* PINGRESP */
    default: return BYTES("OK\n");
    }
}

static int open_client(void) {
    int fd = connect_broker();
    if (proto == NATS) {
        read_until(fd, "INFO ");
        write_all(fd, nats_connect, strlen(nats_connect));
        read_until(fd, "PONG\r\n");
    } else if (proto == MQTT) {
        char packet[128], id[40];
        int idn = snprintf(id, sizeof id, "bc%d-%llx", (int)getpid(), now_ns());
        static const char head[] = { 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 0 }; /* level 4, clean session, keep-alive 0 */
        char body[96];
        memcpy(body, head, sizeof head);
        body[10] = 0; body[11] = (char)idn;
        memcpy(body + 12, id, (size_t)idn);
        size_t bn = 12 + (size_t)idn;
        packet[0] = 0x10;
        int k = 1 + mqtt_length(packet + 1, bn);
        memcpy(packet + k, body, bn);
        write_all(fd, packet, (size_t)k + bn);
        read_until_bytes(fd, "\x20\x02\x00\x00", 4); /* CONNACK, accepted */
    }
    return fd;
}

/* ---- subscriber --------------------------------------------------------- */

struct inbound { int fd; char *buf; size_t used; long long events, dropped, notices, other; long long first, last; int closed; };

/* Parses the decimal digits at *p (up to end); advances *p. -1 if none. */
static long long digits(const char **p, const char *end) {
    long long v = 0; const char *q = *p;
    while (q < end && *q >= '0' && *q <= '9') v = v * 10 + (*q++ - '0');
    if (q == *p) return -1;
    *p = q;
    return v;
}

/* Counts complete frames in c->buf; returns bytes consumed. */
static size_t scan(struct inbound *c) {
    const char *b = c->buf, *end = c->buf + c->used, *p = b;
    for (;;) {
        if (proto == MQTT) {
            /* fixed header byte, remaining length (1-4 bytes of 7 bits), body */
            const char *q = p + 1;
            size_t len = 0;
            int shift = 0, done = 0;
            while (q < end && shift <= 21) {
                unsigned char byte = (unsigned char)*q++;
                len |= (size_t)(byte & 0x7F) << shift;
                shift += 7;
                if (!(byte & 0x80)) { done = 1; break; }
            }
            if (p >= end || !done || q + len > end) break;
            if (((unsigned char)*p & 0xF0) == 0x30) c->events++;
            else if ((unsigned char)*p != 0xD0) c->other++;
            p = q + len;
            continue;
        }
        if (proto == REDIS) {
            /* *N\r\n then N elements: $L\r\n<L bytes>\r\n (or :n\r\n / +s\r\n) */
            const char *q = p;
            if (q >= end) break;
            if (*q != '*') {
                const char *lf = memchr(q, '\n', (size_t)(end - q));
                if (!lf) break;
                c->other++; p = lf + 1; continue;
            }
            q++;
            long long n = digits(&q, end);
            if (n < 0 || q + 2 > end) break;
            q += 2;
            int message = 0, complete = 1;
            for (long long i = 0; i < n; i++) {
                if (q >= end) { complete = 0; break; }
                if (*q == '$') {
                    q++;
                    long long len = digits(&q, end);
                    if (len < 0 || q + 2 + len + 2 > end) { complete = 0; break; }
                    q += 2;
                    if (i == 0 && ((len == 7 && memcmp(q, "message", 7) == 0) || (len == 8 && memcmp(q, "pmessage", 8) == 0))) message = 1;
                    q += len + 2;
                } else {
                    const char *lf = memchr(q, '\n', (size_t)(end - q));
                    if (!lf) { complete = 0; break; }
                    q = lf + 1;
                }
            }
            if (!complete) break;
            if (message) c->events++; else c->other++;
            p = q;
            continue;
        }
        const char *lf = memchr(p, '\n', (size_t)(end - p));
        if (!lf) break;
        size_t len = (size_t)(lf - p);
        if (proto == NATS) {
            if (len >= 4 && memcmp(p, "MSG ", 4) == 0) {
                const char *d = lf - 1; /* CR */
                long long bytes = 0, scale = 1;
                while (d > p + 3 && d[-1] >= '0' && d[-1] <= '9') { bytes += (d[-1] - '0') * scale; scale *= 10; d--; }
                if (lf + 1 + bytes + 2 > end) break;
                c->events++;
                p = lf + 1 + bytes + 2;
                continue;
            }
            if (len >= 4 && memcmp(p, "PING", 4) == 0) write_all(c->fd, "PONG\r\n", 6);
            else if (len >= 4 && (memcmp(p, "PONG", 4) == 0 || memcmp(p, "INFO", 4) == 0)) {}
            else if (len > 1) c->other++;
        } else if (proto == RELAY || (len >= 13 && memcmp(p, "{\"op\":\"event\"", 13) == 0)) {
            c->events++;
        } else if (len >= 15 && memcmp(p, "{\"op\":\"dropped\"", 15) == 0) {
            c->notices++;
            const char *k = memmem(p, len, "\"count\":", 8);
            if (k) { k += 8; long long v = digits(&k, lf); if (v > 0) c->dropped += v; }
        } else if (len > 0) {
            c->other++;
        }
        p = lf + 1;
    }
    return (size_t)(p - b);
}

static int run_sub(int live) {
    struct inbound subs[MAX_SUBS];
    char request[512];
    if (live < 1 || live > MAX_SUBS) { errno = 0; die("--live out of range"); }
    for (int i = 0; i < live; i++) {
        int fd = open_client();
        int n = 0;
        switch (proto) {
        case NATS: n = snprintf(request, 256, "SUB %s 1\r\n", type); break;
        case REDIS: n = snprintf(request, 256, "*2\r\n$9\r\nSUBSCRIBE\r\n$%zu\r\n%s\r\n", strlen(type), type); break;
        case EVENTBUS: n = snprintf(request, 256, "{\"op\":\"subscribe\",\"type\":\"%s\"}\n", type); break;
        case RELAY: n = snprintf(request, 256, "SUB\n"); break;
        case MQTT: { /* SUBSCRIBE, packet id 1, one filter at QoS 0 */
            char topic[256];
            mqtt_topic(topic);
            size_t tn = strlen(topic), bn = 2 + 2 + tn + 1;
            request[0] = (char)0x82;
            n = 1 + mqtt_length(request + 1, bn);
            request[n++] = 0; request[n++] = 1;
            request[n++] = (char)(tn >> 8); request[n++] = (char)(tn & 0xFF);
            memcpy(request + n, topic, tn);
            n += (int)tn;
            request[n++] = 0;
            break;
        }
        }
        struct bytes sync = sync_request(), reply = sync_reply(1);
        memcpy(request + n, sync.p, sync.n);
        write_all(fd, request, (size_t)n + sync.n);
        read_until_bytes(fd, reply.p, reply.n);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        subs[i] = (struct inbound){ .fd = fd, .buf = malloc(READ_SIZE) };
        if (!subs[i].buf) die("malloc");
    }
    printf("ready\n");
    fflush(stdout);
    struct pollfd fds[MAX_SUBS + 1];
    int draining = 0;
    long long last_activity = now_ns();
    char control[256];
    size_t control_used = 0;
    for (;;) {
        int timeout = 1000;
        if (draining) {
            long long quiet = now_ns() - last_activity;
            if (quiet >= 300000000LL) { printf("idle\n"); fflush(stdout); draining = 0; }
            else timeout = (int)((300000000LL - quiet) / 1000000) + 1;
        }
        fds[0] = (struct pollfd){ 0, POLLIN, 0 };
        for (int i = 0; i < live; i++) fds[i + 1] = (struct pollfd){ subs[i].closed ? -1 : subs[i].fd, POLLIN, 0 };
        int r = poll(fds, (nfds_t)live + 1, timeout);
        if (r <= 0) continue;
        for (int i = 0; i < live; i++) {
            struct inbound *c = &subs[i];
            if (!fds[i + 1].revents) continue;
            ssize_t n = read(c->fd, c->buf + c->used, READ_SIZE - c->used);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (n <= 0) { c->closed = 1; continue; }
            long long t = now_ns(), before = c->events;
            last_activity = t;
            c->used += (size_t)n;
            size_t done = scan(c);
            if (c->events != before) { if (!c->first) c->first = t; c->last = t; }
            memmove(c->buf, c->buf + done, c->used - done);
            c->used -= done;
            if (c->used == READ_SIZE) { errno = 0; die("a frame longer than the buffer"); }
        }
        if (fds[0].revents) {
            ssize_t n = read(0, control + control_used, sizeof control - control_used);
            if (n <= 0) return 1;
            control_used += (size_t)n;
            char *lf;
            while ((lf = memchr(control, '\n', control_used))) {
                *lf = 0;
                if (strcmp(control, "drain") == 0) { draining = 1; last_activity = now_ns(); }
                else if (strcmp(control, "result") == 0) {
                    long long events = 0, dropped = 0, notices = 0, other = 0, first = 0, last = 0, closed = 0;
                    for (int i = 0; i < live; i++) {
                        events += subs[i].events; dropped += subs[i].dropped; notices += subs[i].notices;
                        other += subs[i].other; closed += subs[i].closed;
                        if (subs[i].first && (!first || subs[i].first < first)) first = subs[i].first;
                        if (subs[i].last > last) last = subs[i].last;
                    }
                    printf("events=%lld dropped=%lld drop_notices=%lld other=%lld closed=%lld t_first=%lld t_last=%lld "
                           "stalled_events=0 stalled_dropped=0 stalled_drop_notices=0 stalled_closed=0 cpu_us=%lld\n",
                           events, dropped, notices, other, closed, first, last, cpu_us());
                    fflush(stdout);
                    return 0;
                } else { errno = 0; die("unknown control command"); }
                size_t k = (size_t)(lf - control) + 1;
                memmove(control, control + k, control_used - k);
                control_used -= k;
            }
        }
    }
}

/* ---- publisher ---------------------------------------------------------- */

static int run_pub(int payload, double seconds, long long count) {
    if (payload < 37) { errno = 0; die("--payload below 37"); }
    char *data = malloc((size_t)payload + 1), frame[4096 + 256];
    int k = snprintf(data, (size_t)payload + 1, "{\"ts\":\"0000000000000000000\",\"pad\":\"");
    memset(data + k, 'x', (size_t)(payload - k - 2));
    memcpy(data + payload - 2, "\"}", 2);
    int head;
    switch (proto) {
    case NATS: head = snprintf(frame, 256, "PUB %s %d\r\n", type, payload); break;
    case REDIS: head = snprintf(frame, 256, "*3\r\n$7\r\nPUBLISH\r\n$%zu\r\n%s\r\n$%d\r\n", strlen(type), type, payload); break;
    case MQTT: { /* PUBLISH at QoS 0: topic length, topic, payload */
        char topic[256];
        mqtt_topic(topic);
        size_t tn = strlen(topic);
        frame[0] = 0x30;
        head = 1 + mqtt_length(frame + 1, 2 + tn + (size_t)payload);
        frame[head++] = (char)(tn >> 8); frame[head++] = (char)(tn & 0xFF);
        memcpy(frame + head, topic, tn);
        head += (int)tn;
        break;
    }
    default: head = snprintf(frame, 256, "{\"op\":\"publish\",\"type\":\"%s\",\"data\":", type); break;
    }
    if (payload > 4096) { errno = 0; die("--payload above 4096"); }
    memcpy(frame + head, data, (size_t)payload);
    const char *tail = (proto == NATS || proto == REDIS) ? "\r\n" : proto == MQTT ? "" : "}\n";
    size_t frame_bytes = (size_t)head + (size_t)payload + strlen(tail);
    memcpy(frame + head + payload, tail, strlen(tail));
    size_t per = CHUNK / frame_bytes ? CHUNK / frame_bytes : 1, chunk_bytes = per * frame_bytes;
    char *chunk = malloc(chunk_bytes), *replies = malloc(1 << 16);
    for (size_t i = 0; i < per; i++) memcpy(chunk + i * frame_bytes, frame, frame_bytes);

    int fd = open_client();
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    long long start = now_ns(), deadline = start + (long long)(seconds * 1e9);
    unsigned long long written = 0, target = (unsigned long long)count * frame_bytes;
    int stopped = 0, pongs = 0;
    while (written < target) {
        if (!stopped && now_ns() >= deadline) {
            stopped = 1;
            target = (written + frame_bytes - 1) / frame_bytes * frame_bytes;
            if (written >= target) break;
        }
        size_t off = (size_t)(written % chunk_bytes);
        if (off == 0 && pongs) { write_all(fd, "PONG\r\n", 6); pongs = 0; } /* between whole frames */
        size_t len = chunk_bytes - off;
        if (len > target - written) len = (size_t)(target - written);
        ssize_t w = send(fd, chunk + off, len, MSG_NOSIGNAL);
        if (w > 0) { written += (unsigned long long)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN) die("write");
        struct pollfd q = { fd, POLLOUT | POLLIN, 0 };
        poll(&q, 1, 100);
        if (q.revents & POLLIN) { /* replies: redis `:N`, a nats PING; read and drop */
            ssize_t n = recv(fd, replies, 1 << 16, MSG_DONTWAIT);
            if (n == 0) { errno = 0; die("broker closed the connection"); }
            if (n > 0 && proto == NATS && memmem(replies, (size_t)n, "PING", 4)) pongs = 1;
        }
    }
    long long end = now_ns();
    struct bytes sync = sync_request();
    if (sync.n) {
        if (pongs) write_all(fd, "PONG\r\n", 6);
        write_all(fd, sync.p, sync.n);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        /* Read replies until the answer to the sync; keep a tail for a split needle. */
        struct bytes reply = sync_reply(0);
        const char *needle = reply.p;
        size_t nl = reply.n, used = 0;
        long long sync_deadline = now_ns() + 60000000000LL;
        for (;;) {
            struct pollfd q = { fd, POLLIN, 0 };
            if (now_ns() > sync_deadline) { errno = 0; die("no answer to the final sync"); }
            if (poll(&q, 1, 1000) <= 0) continue;
            ssize_t n = read(fd, replies + used, (1 << 16) - used);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) die("closed before the final sync");
            used += (size_t)n;
            if (memmem(replies, used, needle, nl)) break;
            if (used >= nl) { memmove(replies, replies + used - nl, nl); used = nl; }
        }
    }
    long long synced = now_ns();
    close(fd);
    printf("sent=%llu t_start=%lld t_end=%lld t_synced=%lld errors=0 cpu_us=%lld\n",
           written / frame_bytes, start, end, synced, cpu_us());
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2) { fprintf(stderr, "usage: bench-client sub|pub --proto P --socket ADDR ...\n"); return 64; }
    const char *proto_name = NULL;
    int live = 1, payload = 64;
    double seconds = 1;
    long long count = 50000000;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--proto")) proto_name = v;
        else if (!strcmp(k, "--socket")) address = v;
        else if (!strcmp(k, "--type")) type = v;
        else if (!strcmp(k, "--live")) live = atoi(v);
        else if (!strcmp(k, "--payload")) payload = atoi(v);
        else if (!strcmp(k, "--seconds")) seconds = atof(v);
        else if (!strcmp(k, "--count")) count = atoll(v);
        else if (!strcmp(k, "--stalled") && atoi(v) != 0) { fprintf(stderr, "bench-client: no stalled subscribers\n"); return 64; }
        else if (!strcmp(k, "--rate") && atoi(v) != 0) { fprintf(stderr, "bench-client: floods only (no --rate)\n"); return 64; }
    }
    if (!proto_name || !address) { fprintf(stderr, "bench-client: --proto and --socket are needed\n"); return 64; }
    if (!strcmp(proto_name, "nats")) proto = NATS;
    else if (!strcmp(proto_name, "redis")) proto = REDIS;
    else if (!strcmp(proto_name, "mqtt")) proto = MQTT;
    else if (!strcmp(proto_name, "eventbus")) proto = EVENTBUS;
    else if (!strcmp(proto_name, "relay")) proto = RELAY;
    else { fprintf(stderr, "bench-client: no %s (nats, redis, mqtt, eventbus, relay)\n", proto_name); return 64; }
    if (!strcmp(argv[1], "sub")) return run_sub(live);
    if (!strcmp(argv[1], "pub")) return run_pub(payload, seconds, count);
    fprintf(stderr, "bench-client: unknown role %s\n", argv[1]);
    return 64;
}

/* bench-relay: the ceiling for any NDJSON broker in scripts/bench (issue 14).
 *
 * Usage: bench-relay SOCKET_PATH
 *
 * Listens on a Unix socket. A connection whose first line is "SUB" is a
 * subscriber and is answered "OK\n"; any other connection is a publisher:
 * every complete LF-terminated line it sends is forwarded, unparsed and in
 * the batches it was read in, to every subscriber. Nothing is validated,
 * routed, stamped or rewritten: what is left is reading, the line boundary,
 * and writing, the part of a broker's work that no broker here can skip.
 *
 * Before editing: keep it this simple. Writes go straight from the read
 * buffer to each subscriber; what a subscriber's socket does not take is
 * queued for it, and while any subscriber has more than HIGH_WATER bytes
 * queued no publisher is read (back-pressure, never loss). A subscriber
 * that stops reading therefore stops the relay: the stalled-subscriber case
 * does not apply to it. Stopped by SIGTERM (the default action).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define READ_SIZE (256 * 1024)
#define HIGH_WATER (4 * 1024 * 1024)
#define MAX_CONNS 4096

enum role { UNKNOWN, PUBLISHER, SUBSCRIBER };

struct conn {
    int fd;
    enum role role;
    char *in;          /* publisher: bytes read, the tail after the last LF kept */
    size_t in_used;
    char *out;         /* subscriber: bytes its socket did not take yet */
    size_t out_used, out_cap;
    int over;          /* counted in `over_high` */
};

static struct conn *conns[MAX_CONNS]; /* by fd */
static int subscribers[MAX_CONNS], nsubscribers;
static int over_high;                 /* subscribers with more than HIGH_WATER queued */
static int epfd;

static void die(const char *what) {
    fprintf(stderr, "bench-relay: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void watch(int fd, unsigned events, int op) {
    struct epoll_event ev = { .events = events, .data.fd = fd };
    if (epoll_ctl(epfd, op, fd, &ev) < 0) die("epoll_ctl");
}

/* Stops or resumes reading every publisher. */
static void set_publishers_paused(int paused) {
    for (int fd = 0; fd < MAX_CONNS; fd++)
        if (conns[fd] && conns[fd]->role == PUBLISHER) watch(fd, paused ? 0 : EPOLLIN, EPOLL_CTL_MOD);
}

static void update_over(struct conn *c) {
    int now = c->out_used > HIGH_WATER;
    if (now == c->over) return;
    c->over = now;
    over_high += now ? 1 : -1;
    if (over_high == (now ? 1 : 0)) set_publishers_paused(now);
}

static void drop(struct conn *c) {
    if (c->role == SUBSCRIBER) {
        for (int i = 0; i < nsubscribers; i++)
            if (subscribers[i] == c->fd) { subscribers[i] = subscribers[--nsubscribers]; break; }
        c->out_used = 0;
        update_over(c);
    }
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    conns[c->fd] = NULL;
    free(c->in);
    free(c->out);
    free(c);
}

/* Appends to a subscriber's queue, growing it as needed. */
static void queue(struct conn *s, const char *data, size_t n) {
    if (s->out_used + n > s->out_cap) {
        size_t cap = s->out_cap ? s->out_cap : 65536;
        while (cap < s->out_used + n) cap *= 2;
        if (!(s->out = realloc(s->out, cap))) die("realloc");
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_used, data, n);
    s->out_used += n;
}

/* Writes what a subscriber has queued; returns -1 when it went away. */
static int flush(struct conn *s) {
    size_t done = 0;
    while (done < s->out_used) {
        ssize_t w = send(s->fd, s->out + done, s->out_used - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) { done += (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) break;
        return -1;
    }
    memmove(s->out, s->out + done, s->out_used - done);
    s->out_used -= done;
    watch(s->fd, s->out_used ? EPOLLIN | EPOLLOUT : EPOLLIN, EPOLL_CTL_MOD);
    update_over(s);
    return 0;
}

/* Sends `n` bytes of whole lines to every subscriber. */
static void forward(const char *data, size_t n) {
    for (int i = 0; i < nsubscribers; i++) {
        struct conn *s = conns[subscribers[i]];
        size_t done = 0;
        if (s->out_used == 0) {
            while (done < n) {
                ssize_t w = send(s->fd, data + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0) { done += (size_t)w; continue; }
                if (w < 0 && errno == EINTR) continue;
                break; /* EAGAIN queues the rest; an error shows up as EPOLLHUP/ERR */
            }
        }
        if (done < n) {
            int was_empty = s->out_used == 0;
            queue(s, data + done, n - done);
            if (was_empty) watch(s->fd, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
            update_over(s);
        }
    }
}

static void readable(struct conn *c) {
    if (c->role == SUBSCRIBER) { /* a subscriber says nothing more: read to notice EOF */
        char scratch[4096];
        ssize_t r = read(c->fd, scratch, sizeof scratch);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) drop(c);
        return;
    }
    ssize_t r = read(c->fd, c->in + c->in_used, READ_SIZE - c->in_used);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) { drop(c); return; }
    c->in_used += (size_t)r;
    if (c->role == UNKNOWN) {
        size_t k = c->in_used < 4 ? c->in_used : 4;
        if (memcmp(c->in, "SUB\n", k) == 0) {
            if (k < 4) return; /* wait for the rest of the first line */
            c->role = SUBSCRIBER;
            c->in_used = 0;
            subscribers[nsubscribers++] = c->fd;
            if (send(c->fd, "OK\n", 3, MSG_NOSIGNAL) != 3) drop(c);
            return;
        }
        c->role = PUBLISHER;
        if (over_high) watch(c->fd, 0, EPOLL_CTL_MOD);
    }
    char *last = memrchr(c->in, '\n', c->in_used);
    if (!last) {
        if (c->in_used == READ_SIZE) c->in_used = 0; /* a line longer than the buffer: not ours */
        return;
    }
    size_t n = (size_t)(last - c->in) + 1;
    forward(c->in, n);
    memmove(c->in, c->in + n, c->in_used - n);
    c->in_used -= n;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: bench-relay SOCKET_PATH\n"); return 64; }
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (lfd < 0) die("socket");
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (strlen(argv[1]) >= sizeof addr.sun_path) { fprintf(stderr, "bench-relay: path too long\n"); return 64; }
    strcpy(addr.sun_path, argv[1]);
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    if (listen(lfd, 1024) < 0) die("listen");
    if ((epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) die("epoll_create1");
    watch(lfd, EPOLLIN, EPOLL_CTL_ADD);
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(epfd, events, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int cfd;
                while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (cfd >= MAX_CONNS) { close(cfd); continue; }
                    struct conn *c = calloc(1, sizeof *c);
                    if (!c || !(c->in = malloc(READ_SIZE))) die("malloc");
                    c->fd = cfd;
                    conns[cfd] = c;
                    watch(cfd, EPOLLIN, EPOLL_CTL_ADD);
                }
                continue;
            }
            struct conn *c = conns[fd];
            if (!c) continue;
            if ((events[i].events & EPOLLOUT) && flush(c) < 0) { drop(c); continue; }
            if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readable(c);
        }
    }
}

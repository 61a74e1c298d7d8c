/* What scripts/bench-client.c and scripts/bench-rr.c share: dying with the
 * errno, a monotonic clock, a blocking write of everything, and a connection
 * to the broker at `address` ("tcp:127.x.x.x:PORT" or a Unix socket path).
 * Each includes it after defining BENCH_NAME (the word in front of errors)
 * and declaring `static const char *address;`. */

static void die(const char *what) {
    fprintf(stderr, BENCH_NAME ": %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
    exit(1);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) { p += w; n -= (size_t)w; continue; }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EAGAIN) { struct pollfd q = { fd, POLLOUT, 0 }; poll(&q, 1, 1000); continue; }
        die("write");
    }
}

static int connect_broker(void) {
    int fd;
    if (strncmp(address, "tcp:", 4) == 0) {
        char host[64];
        const char *colon = strrchr(address + 4, ':');
        if (!colon || (size_t)(colon - address - 4) >= sizeof host) die("bad tcp address");
        memcpy(host, address + 4, (size_t)(colon - address - 4));
        host[colon - address - 4] = 0;
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(colon + 1)) };
        if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || (ntohl(a.sin_addr.s_addr) >> 24) != 127) die("only loopback addresses");
        if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) die("socket");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    } else {
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (strlen(address) >= sizeof a.sun_path) die("socket path too long");
        strcpy(a.sun_path, address);
        if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) die("socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    }
    return fd;
}

// Header-only bridge to Linux APIs that Swift's Glibc module does not import:
// epoll, signalfd, eventfd, accept4, struct ucred, SO_PEERGROUPS, pipe2, malloc_trim,
// getrandom.
//
// Before editing: do not define _GNU_SOURCE for the whole module (it turns the
// sockaddr parameters of bind/connect/accept into a transparent union Swift
// cannot call); the few GNU-only calls are declared here by hand instead.
#ifndef EVENTBUS_SHIMS_H
#define EVENTBUS_SHIMS_H

#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <stdlib.h>
#include <sys/random.h>
#include <dirent.h>

/// Mirrors glibc's `struct ucred` (only visible under _GNU_SOURCE).
typedef struct eventbus_ucred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
} eventbus_ucred;

extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);
extern int pipe2(int pipefd[2], int flags);
/// glibc's malloc_trim(3) (declared in <malloc.h>, which Swift's Glibc module does not import).
extern int malloc_trim(size_t pad);

/// `accept4(fd, NULL, NULL, SOCK_NONBLOCK|SOCK_CLOEXEC)`; -1 with errno on failure.
static inline int eventbus_accept_nonblocking(int fd) {
    return accept4(fd, (struct sockaddr *)0, (socklen_t *)0, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/// `getsockopt(fd, SOL_SOCKET, SO_PEERCRED)`; 0 on success, -1 with errno.
static inline int eventbus_peer_credentials(int fd, eventbus_ucred *out) {
    socklen_t len = sizeof(*out);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, out, &len);
}

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

/// `getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS)` (Linux 4.13+, socket(7)): the
/// peer's supplementary groups as of connect(2), up to `*count` of them.
/// 0 on success with `*count` set to the number written; -1 with errno
/// (ERANGE: `*count` is set to the number needed).
static inline int eventbus_peer_groups(int fd, gid_t *groups, int *count) {
    socklen_t len = (socklen_t)((unsigned)*count * sizeof(gid_t));
    int result = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len);
    if (result == 0 || errno == ERANGE) *count = (int)(len / sizeof(gid_t));
    return result;
}

/// `pipe2(fds, O_CLOEXEC | O_NONBLOCK)`.
static inline int eventbus_pipe_nonblocking(int fds[2]) {
    return pipe2(fds, O_CLOEXEC | O_NONBLOCK);
}

/// `ioctl(fd, TIOCGWINSZ)` (ioctl is variadic: Swift cannot call it): the
/// terminal's rows and columns; 0 on success, -1 with errno (ENOTTY).
static inline int eventbus_window_size(int fd, unsigned short *rows, unsigned short *columns) {
    struct winsize size;
    int result = ioctl(fd, TIOCGWINSZ, &size);
    if (result == 0) { *rows = size.ws_row; *columns = size.ws_col; }
    return result;
}

/// The errno of the calling thread.
/// Fills `n` bytes from getrandom(2), the system CSPRNG (flags 0: it blocks
/// only until the kernel's pool is first seeded at boot); aborts if the
/// kernel refuses (no getrandom: nothing safe to fall back to).
static inline void eventbus_random_bytes(void *buf, size_t n) {
    unsigned char *p = (unsigned char *)buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            abort();
        }
        p += r;
        n -= (size_t)r;
    }
}

static inline int eventbus_errno(void) { return errno; }
static inline void eventbus_set_errno(int value) { errno = value; }

/// Epoll event masks as plain unsigned ints (the enum does not import cleanly).
static const unsigned int EVENTBUS_EPOLLIN = EPOLLIN;
static const unsigned int EVENTBUS_EPOLLOUT = EPOLLOUT;
static const unsigned int EVENTBUS_EPOLLERR = EPOLLERR;
static const unsigned int EVENTBUS_EPOLLHUP = EPOLLHUP;
static const unsigned int EVENTBUS_EPOLLRDHUP = EPOLLRDHUP;
static const unsigned int EVENTBUS_EPOLLET = EPOLLET;

/// Blocks `signals` for the calling thread (and so for threads it starts), so
/// they can be read from a signalfd. Returns 0 or -1 with errno.
static inline int eventbus_block_signals(const int *signals, int count) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < count; i++) sigaddset(&set, signals[i]);
    return pthread_sigmask(SIG_BLOCK, &set, (sigset_t *)0);
}

/// `signalfd(-1, {signals}, SFD_NONBLOCK|SFD_CLOEXEC)`.
static inline int eventbus_signalfd(const int *signals, int count) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < count; i++) sigaddset(&set, signals[i]);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/// The NUL-terminated name of a readdir(3) entry (Swift sees `d_name` as a tuple).
static inline const char *eventbus_dirent_name(const struct dirent *entry) { return entry->d_name; }

/// Sets `c_cc[index]` of `mode` (Swift sees `c_cc` as a tuple).
static inline void eventbus_termios_set_cc(struct termios *mode, int index, cc_t value) { mode->c_cc[index] = value; }

/// Sets SIGPIPE to SIG_IGN for the whole process.
static inline void eventbus_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

#endif

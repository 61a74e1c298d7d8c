// Socket activation: taking the listening sockets systemd passes to eventbusd.
//
// Before editing: `takeListeningSockets()` unsets LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES
// (so children do not inherit them) and must therefore be called once, early, before
// other threads read the environment.
//
// Raw memory (issue 35): the one pointer of EventBusSystemd. libsystemd's
// `sd_listen_fds_with_names` hands back a `char **` it allocated (`count`
// strings, then NULL); `takeListeningSockets` owns it, copies each name into
// a String, and frees every string and the array before it returns
// (`freeStringVector`, deferred). The journal sink's iovecs are an
// `IOVectors` of EventBusSystem.
import CSystemd
import EventBusSystem
import Glibc

/// One listening socket passed by the service manager.
///
/// The process owns `fd` (systemd keeps its own copy in the .socket unit); it is an
/// `AF_UNIX` `SOCK_STREAM` socket, already bound and listening, with `FD_CLOEXEC` set.
/// It is *blocking* unless the unit says `NonBlocking=yes` (`systemd.socket(5)`): set
/// `O_NONBLOCK` before accepting on it from an event loop.
package struct ActivatedSocket: Sendable, Equatable {
    /// The descriptor, numbered from `SD_LISTEN_FDS_START` (3) upward.
    package let fd: CInt
    /// The name from `FileDescriptorName=` in the .socket unit (`LISTEN_FDNAMES`,
    /// `systemd.socket(5)`), by default the socket unit's name, e.g. `"eventbus.socket"`;
    /// `"unknown"` when the manager passed no names (`systemd-socket-activate` without `--fdname`).
    package let name: String

    /// - Parameters:
    ///   - fd: a listening descriptor.
    ///   - name: its `LISTEN_FDNAMES` entry.
    package init(fd: CInt, name: String) {
        self.fd = fd
        self.name = name
    }
}

/// Why the sockets passed by the service manager cannot be used. Its `description`
/// is one line, meant to be printed as the daemon's last words before exiting non-zero.
package struct SocketActivationError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What went wrong.
    package enum Reason: Sendable, Equatable {
        /// `sd_listen_fds_with_names(3)` failed with this errno: `EINVAL` when LISTEN_PID
        /// or LISTEN_FDS is not a number or LISTEN_FDS is not positive, or LISTEN_FDNAMES
        /// has the wrong count; `EBADF` when a passed descriptor is not open. The values
        /// are the variables as they were before the call unset them (nil: unset).
        case badEnvironment(errno: CInt, listenPID: String?, listenFDs: String?, listenFDNames: String?)
        /// The descriptor is not a listening `AF_UNIX` `SOCK_STREAM` socket
        /// (for example under `Accept=yes`, which passes connected sockets).
        case notListeningUnixStream(fd: CInt, name: String)
        /// `sd_is_socket_unix(3)` itself failed on the descriptor with this errno.
        case checkFailed(fd: CInt, name: String, errno: CInt)
    }

    /// What went wrong.
    package let reason: Reason

    /// - Parameter reason: what went wrong.
    package init(_ reason: Reason) { self.reason = reason }

    /// One line, e.g.
    /// `fd 3 (name 'unknown') is not a listening AF_UNIX stream socket; Accept=yes is not supported`.
    package var description: String {
        switch reason {
        case let .badEnvironment(code, pid, fds, names):
            func show(_ value: String?) -> String { value.map { "'\($0)'" } ?? "unset" }
            return "invalid socket activation environment (LISTEN_PID=\(show(pid)) LISTEN_FDS=\(show(fds)) "
                + "LISTEN_FDNAMES=\(show(names))): sd_listen_fds_with_names: \(errnoText(code))"
        case let .notListeningUnixStream(fd, name):
            return "fd \(fd) (name '\(name)') is not a listening AF_UNIX stream socket; Accept=yes is not supported"
        case let .checkFailed(fd, name, code):
            return "cannot inspect fd \(fd) (name '\(name)'): sd_is_socket_unix: \(errnoText(code))"
        }
    }
}

/// systemd socket activation (`sd_listen_fds(3)`, `sd_listen_fds_with_names(3)`,
/// `systemd.socket(5)`), as PROTOCOL.md "Transport" requires: under activation the
/// broker serves every passed socket and never binds or unlinks a path itself.
package enum SocketActivation {
    /// Takes the listening sockets passed by the service manager, or returns nil when
    /// this process was not socket-activated.
    ///
    /// Calls `sd_listen_fds_with_names(1, ...)`, which checks `LISTEN_PID` against our
    /// pid, sets `FD_CLOEXEC` on each fd and unsets `LISTEN_PID`, `LISTEN_FDS` and
    /// `LISTEN_FDNAMES` in every case. Each fd must pass
    /// `sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0` (`sd_is_socket(3)`).
    /// More than one socket is allowed (e.g. two `ListenStream=` lines).
    ///
    /// - Returns: the sockets in fd order (fd 3, 4, ...), owned by the caller; nil when
    ///   `LISTEN_PID` or `LISTEN_FDS` is unset or `LISTEN_PID` names another process.
    /// - Throws: `SocketActivationError` when the variables are set for us but malformed
    ///   (`.badEnvironment`), or when any fd is not a listening `AF_UNIX` stream socket
    ///   (`.notListeningUnixStream`, e.g. `Accept=yes` or `systemd-socket-activate --accept`).
    ///   The descriptors are left open when it throws; the caller is expected to exit.
    package static func takeListeningSockets() throws -> [ActivatedSocket]? {
        let pid = environment("LISTEN_PID")
        let fds = environment("LISTEN_FDS")
        let fdNames = environment("LISTEN_FDNAMES")

        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = nil
        let count = sd_listen_fds_with_names(1, &names)
        defer { freeStringVector(names) }
        if count < 0 {
            throw SocketActivationError(
                .badEnvironment(errno: -count, listenPID: pid, listenFDs: fds, listenFDNames: fdNames))
        }
        if count == 0 { return nil }

        var sockets: [ActivatedSocket] = []
        sockets.reserveCapacity(Int(count))
        for index in 0..<Int(count) {
            let fd = SD_LISTEN_FDS_START + CInt(index)
            let name = names?[index].map { String(cString: $0) } ?? "unknown"
            let check = sd_is_socket_unix(fd, CInt(SOCK_STREAM.rawValue), 1, nil, 0)
            if check < 0 { throw SocketActivationError(.checkFailed(fd: fd, name: name, errno: -check)) }
            if check == 0 { throw SocketActivationError(.notListeningUnixStream(fd: fd, name: name)) }
            sockets.append(ActivatedSocket(fd: fd, name: name))
        }
        return sockets
    }
}

/// `getenv(3)` as a Swift string; nil when unset (`ProcessEnvironment.value`).
func environment(_ name: String) -> String? {
    ProcessEnvironment.value(name)
}

/// `"Invalid argument (errno 22)"`: `strerror(3)` text plus the number.
func errnoText(_ code: CInt) -> String {
    let text = strerror(code).map { String(cString: $0) } ?? "unknown error"
    return "\(text) (errno \(code))"
}

/// Frees a NULL-terminated string array allocated by libsystemd (its `strv_free`).
private func freeStringVector(_ vector: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) {
    guard let vector else { return }
    var index = 0
    while let entry = vector[index] {
        free(entry)
        index += 1
    }
    free(vector)
}

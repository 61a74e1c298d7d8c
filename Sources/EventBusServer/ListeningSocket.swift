// Listening sockets for a broker started by hand (PROTOCOL.md "Transport"):
// create the parent directory (0755), refuse when a live broker answers on the
// path, replace a stale socket file, never remove anything that is not a
// socket, bind with the requested mode, unlink on clean exit.
//
// Before editing: `unlinkOnClose` is true only for a path this process bound;
// sockets passed by systemd (sd_listen_fds(3)) are never unlinked.
import EventBusSystem
import Glibc

/// A listening socket the server accepts on. Owns its fd.
package final class ListeningSocket {
    package let descriptor: FileDescriptor
    /// The filesystem path, when known (for messages and unlinking).
    package let path: String?
    /// Whether this process bound the path and so must unlink it on exit.
    package let unlinkOnClose: Bool
    private var closed = false

    /// Adopts an already listening fd (e.g. from socket activation); never
    /// unlinks. Makes it non-blocking: systemd passes blocking sockets, and a
    /// blocking accept(2) would stall the event loop.
    /// - Throws: `SystemError("fcntl", errno)`.
    package init(adopting descriptor: FileDescriptor, path: String?) throws(SystemError) {
        try descriptor.setNonBlocking(true)
        self.descriptor = descriptor
        self.path = path
        self.unlinkOnClose = false
    }

    init(bound descriptor: FileDescriptor, path: String) {
        self.descriptor = descriptor
        self.path = path
        self.unlinkOnClose = true
    }

    /// Errors starting to listen on a path, each a one-line explanation.
    package struct BindError: Error, CustomStringConvertible {
        package let description: String
    }

    /// Binds and listens on `path` following PROTOCOL.md "Transport".
    /// - Parameters:
    ///   - path: the socket path (at most 107 bytes).
    ///   - mode: permission bits for the socket file (default 0666).
    ///   - backlog: listen(2) backlog.
    /// - Throws: `BindError` naming the path and the reason.
    package static func bind(path: String, mode: mode_t = 0o666, backlog: Int32 = 4096) throws(BindError) -> ListeningSocket {
        func fail(_ what: String) -> BindError { BindError(description: "cannot listen on \(path): \(what)") }
        if path.utf8.count > UnixAddress.maxPathBytes {
            throw fail("path is \(path.utf8.count) bytes; a Unix socket path holds at most \(UnixAddress.maxPathBytes)")
        }
        let parent = FileSystem.parentDirectory(of: path)
        do {
            try FileSystem.createDirectories(parent, mode: 0o755)
        } catch {
            throw fail("cannot create directory \(parent): \(error.errno)")
        }
        let existing: FileKind
        do { existing = try FileSystem.kind(ofPath: path) } catch { throw fail("\(error)") }
        switch existing {
        case .missing:
            break
        case .socket:
            // Live broker, or a stale file left by a dead one?
            do {
                let probe = try FileDescriptor.connectedUnixSocket(toPath: path, nonBlocking: true)
                let listener = try? probe.peerCredentials()
                probe.close()
                // In a shared folder another user may have bound the path first:
                // say whose it is rather than call it a broker.
                if let listener, listener.uid != ProcessIdentity.current.uid {
                    throw fail("a process of uid \(listener.uid) (pid \(listener.pid)) is already listening there, not one of this uid's")
                }
                throw fail("another broker is already listening there")
            } catch let error as BindError {
                throw error
            } catch let error as SystemError where error.errno == .connectionRefused {
                do { try FileSystem.unlink(path) } catch { throw fail("cannot remove stale socket: \(error.errno)") }
            } catch let error as SystemError where error.errno == .wouldBlock {
                throw fail("another broker is already listening there (its backlog is full)")
            } catch {
                throw fail("cannot check the existing socket: \(error)")
            }
        case .regular, .directory, .other:
            throw fail("the path exists and is not a socket; not removing it")
        }
        let fd: FileDescriptor
        do { fd = try FileDescriptor.unixStreamSocket(nonBlocking: true) } catch { throw fail("\(error)") }
        do {
            try fd.bind(toPath: path)
            try FileSystem.chmod(path, mode: mode)
            try fd.listen(backlog: backlog)
        } catch {
            fd.close()
            throw fail("\(error)")
        }
        return ListeningSocket(bound: fd, path: path)
    }

    /// Closes the fd and, if this process bound the path, unlinks it (only
    /// while it is still a socket). Idempotent.
    package func close() {
        guard !closed else { return }
        closed = true
        descriptor.close()
        if unlinkOnClose, let path, (try? FileSystem.kind(ofPath: path)) == .socket {
            try? FileSystem.unlink(path)
        }
    }

    deinit { close() }
}

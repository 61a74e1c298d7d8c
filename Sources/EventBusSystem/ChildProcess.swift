// Running a COMMAND for `eventbus wait` and `eventbus serve`: posix_spawnp(3),
// waitpid(2), kill(2); for `serve` (1.3) with its standard descriptors on
// pipes (`Pipe`) and in a process group of its own, so that a COMMAND past
// its request's deadline is killed with everything it started.
//
// Before editing: a spawned child gets SIGPIPE (and SIGINT/SIGTERM/SIGQUIT)
// back at their default dispositions, because the CLI ignores SIGPIPE and an
// ignored disposition would otherwise be inherited across exec. Every socket
// this package creates is close-on-exec, so no broker connection leaks into it.
//
// Raw memory (issue 35): `spawn` owns its argv (one strdup(3) per argument,
// a NULL last, every one freed after posix_spawnp returns, which copies them).
import CEventBusShims
import Glibc

/// How a child process ended, decoded from a waitpid(2) status word.
package enum ChildExit: Equatable, Sendable, CustomStringConvertible {
    /// `exit(code)`, code 0...255.
    case exited(Int32)
    /// Killed by signal number `signal`.
    case signaled(Int32)

    /// Decodes waitpid(2)'s status (the WIFEXITED/WEXITSTATUS/WTERMSIG macros,
    /// which Swift does not import).
    package init(waitStatus status: Int32) {
        let low = status & 0x7F
        self = low == 0 ? .exited((status >> 8) & 0xFF) : .signaled(low)
    }

    /// The status a shell would report: the exit code, or 128 + signal.
    package var shellStatus: Int32 {
        switch self {
        case .exited(let code): code
        case .signaled(let signal): 128 + signal
        }
    }

    /// `exit status 3`, `signal 9`.
    package var description: String {
        switch self {
        case .exited(let code): "exit status \(code)"
        case .signaled(let signal): "signal \(signal)"
        }
    }
}

/// A child process started with `ChildProcess.spawn`. Not an owner of anything
/// but the duty to reap it once (`poll()` or `wait()` returning non-nil).
package struct ChildProcess: Sendable {
    /// The child's process id.
    package let pid: pid_t

    /// Starts `arguments[0]`, searched in `PATH` like execvp(3), with the
    /// caller's environment, standard descriptors and working directory.
    /// SIGPIPE, SIGINT, SIGTERM and SIGQUIT are reset to their defaults.
    /// - Parameter arguments: the command and its arguments; not empty.
    /// - Throws: `SystemError("posix_spawnp", errno)`: ENOENT when the command
    ///   is not found, EACCES when it cannot be executed.
    package static func spawn(_ arguments: [String]) throws(SystemError) -> ChildProcess {
        try spawn(arguments, standardDescriptors: nil, ownProcessGroup: false)
    }

    /// Starts `arguments[0]` as `spawn(_:)` does, with its standard input,
    /// output and error on `input`, `output` and `error` (each dup2'd onto
    /// 0, 1, 2 in the child; the caller closes its copies), in a new process
    /// group whose id is the child's pid (`sendToGroup(signal:)`).
    /// - Throws: as `spawn(_:)`.
    package static func spawn(_ arguments: [String], input: FileDescriptor, output: FileDescriptor, error: FileDescriptor) throws(SystemError) -> ChildProcess {
        try spawn(arguments, standardDescriptors: (input, output, error), ownProcessGroup: true)
    }

    private static func spawn(_ arguments: [String], standardDescriptors: (FileDescriptor, FileDescriptor, FileDescriptor)?, ownProcessGroup: Bool) throws(SystemError) -> ChildProcess {
        precondition(!arguments.isEmpty, "spawn needs a command")
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGQUIT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK
        if ownProcessGroup {
            flags |= POSIX_SPAWN_SETPGROUP
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let (input, output, error) = standardDescriptors {
            // dup2 clears close-on-exec on the copy; the originals (close-on-exec pipes) vanish at exec.
            posix_spawn_file_actions_adddup2(&actions, input.rawValue, 0)
            posix_spawn_file_actions_adddup2(&actions, output.rawValue, 1)
            posix_spawn_file_actions_adddup2(&actions, error.rawValue, 2)
        }

        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, argv[0]!, &actions, &attributes, &argv, environ)
        guard result == 0 else { throw SystemError("posix_spawnp", Errno(rawValue: result)) }
        return ChildProcess(pid: pid)
    }

    /// waitpid(2) with WNOHANG: the exit if the child has ended (it is reaped
    /// then; do not call again), nil while it runs.
    /// - Throws: `SystemError("waitpid", errno)`.
    package func poll() throws(SystemError) -> ChildExit? {
        var status: Int32 = 0
        let result = try checkedCall("waitpid") { waitpid(pid, &status, WNOHANG) }
        return result == pid ? ChildExit(waitStatus: status) : nil
    }

    /// kill(2); errors (the child already gone) are ignored.
    package func send(signal: Int32) {
        _ = kill(pid, signal)
    }

    /// kill(2) of the child's process group (a child started with
    /// `spawn(_:input:output:error:)` leads its own); errors are ignored.
    package func sendToGroup(signal: Int32) {
        _ = kill(-pid, signal)
    }
}

/// A pipe(2), both ends close-on-exec and non-blocking unless said.
package struct Pipe: Sendable {
    package let readEnd: FileDescriptor
    package let writeEnd: FileDescriptor

    /// pipe2(2) with `O_CLOEXEC`; `O_NONBLOCK` on the ends named.
    /// - Throws: `SystemError("pipe2", errno)`, e.g. EMFILE.
    package init(nonBlockingRead: Bool, nonBlockingWrite: Bool) throws(SystemError) {
        var fds: [Int32] = [-1, -1]
        _ = try checkedCall("pipe2") { pipe2(&fds, O_CLOEXEC) }
        readEnd = FileDescriptor(rawValue: fds[0])
        writeEnd = FileDescriptor(rawValue: fds[1])
        do {
            if nonBlockingRead { try readEnd.setNonBlocking(true) }
            if nonBlockingWrite { try writeEnd.setNonBlocking(true) }
        } catch {
            readEnd.close()
            writeEnd.close()
            throw error
        }
    }
}

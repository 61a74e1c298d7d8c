// Passing a socket between processes over an AF_UNIX socketpair: one byte of
// data and one SCM_RIGHTS descriptor per message (unix(7), cmsg(3)). The test's
// side (`connectAs`) receives; `eventbus-uid-peer` sends.
//
// Before editing: Swift does not import the CMSG_* macros, so the control
// buffer is laid out here, once, for both directions: struct cmsghdr
// { size_t cmsg_len; int cmsg_level; int cmsg_type; } then one int, the whole
// 8-byte aligned (x86_64 and aarch64 glibc).
import Glibc

/// Bytes before the descriptor in the control buffer (the cmsghdr).
private let controlHeaderSize = MemoryLayout<Int>.size + 2 * MemoryLayout<Int32>.size

/// Runs `transfer` (sendmsg or recvmsg) on a msghdr whose one iovec is
/// `byte` and whose control buffer is `control`; returns what it returns.
private func withOneByteMessage(_ byte: inout UInt8, _ control: inout [UInt8], _ transfer: (inout msghdr) -> Int) -> Int {
    withUnsafeMutablePointer(to: &byte) { bytePointer in
        control.withUnsafeMutableBytes { controlRaw in
            var vector = iovec(iov_base: UnsafeMutableRawPointer(bytePointer), iov_len: 1)
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var message = msghdr()
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                message.msg_control = controlRaw.baseAddress
                message.msg_controllen = controlRaw.count
                return transfer(&message)
            }
        }
    }
}

/// Sends `descriptor` over the connected AF_UNIX socket `socket` with one
/// byte of data (sendmsg(2), SCM_RIGHTS); the receiver gets its own copy.
/// - Returns: whether the message went out (false: errno says why).
package func sendDescriptor(_ descriptor: Int32, over socket: Int32) -> Bool {
    var control = [UInt8](repeating: 0, count: controlHeaderSize + 8)
    control.withUnsafeMutableBytes { raw in
        raw.storeBytes(of: controlHeaderSize + MemoryLayout<Int32>.size, toByteOffset: 0, as: Int.self)
        raw.storeBytes(of: SOL_SOCKET, toByteOffset: MemoryLayout<Int>.size, as: Int32.self)
        raw.storeBytes(of: Int32(SCM_RIGHTS), toByteOffset: MemoryLayout<Int>.size + 4, as: Int32.self)
        raw.storeBytes(of: descriptor, toByteOffset: controlHeaderSize, as: Int32.self)
    }
    var byte: UInt8 = 0x2A
    return withOneByteMessage(&byte, &control) { sendmsg(socket, &$0, 0) } == 1
}

/// Receives one descriptor (SCM_RIGHTS, close-on-exec) from `socket`, waiting
/// until `deadline`; `sender` names the other process in errors.
/// - Returns: the descriptor, owned by the caller; nil at EOF.
/// - Throws: `TestFailure` when nothing arrives in time, recvmsg(2) fails or
///   the message carries no descriptor.
func receiveDescriptor(_ socket: Int32, from sender: String, deadline: ContinuousClock.Instant) throws -> Int32? {
    guard try waitReadable(socket, until: deadline) else { throw TestFailure("no socket from \(sender) in time") }
    var control = [UInt8](repeating: 0, count: controlHeaderSize + 8)
    var byte: UInt8 = 0
    let received = withOneByteMessage(&byte, &control) { recvmsg(socket, &$0, Int32(MSG_CMSG_CLOEXEC)) }
    if received == 0 { return nil }
    guard received == 1 else { throw TestFailure("recvmsg failed: errno \(errno)") }
    let (level, type, fd) = control.withUnsafeBytes { raw in
        (raw.load(fromByteOffset: MemoryLayout<Int>.size, as: Int32.self),
         raw.load(fromByteOffset: MemoryLayout<Int>.size + 4, as: Int32.self),
         raw.load(fromByteOffset: controlHeaderSize, as: Int32.self))
    }
    guard level == SOL_SOCKET, type == Int32(SCM_RIGHTS), fd >= 0 else { throw TestFailure("\(sender) sent no descriptor") }
    return fd
}

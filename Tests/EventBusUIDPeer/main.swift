// eventbus-uid-peer SOCKET COUNT: connects COUNT times to the broker at
// SOCKET and hands each connected socket to its parent over fd 3 (one byte
// and one SCM_RIGHTS descriptor per message, unix(7)), then exits. Run
// through `setpriv --reuid N --regid N --clear-groups`, the connections carry
// uid N in SO_PEERCRED (taken at connect time), while the test drives them
// itself (EventBusTestSupport `connectAs`). Exit 0 when all were passed; 1
// with a line on stderr otherwise.
import Glibc

func fail(_ message: String) -> Never {
    let text = "eventbus-uid-peer: \(message) (errno \(errno))\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: eventbus-uid-peer SOCKET COUNT") }
let path = arguments[1]

var address = sockaddr_un()
address.sun_family = sa_family_t(AF_UNIX)
let pathBytes = Array(path.utf8)
guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else { fail("socket path too long") }
withUnsafeMutableBytes(of: &address.sun_path) { raw in
    for (i, b) in pathBytes.enumerated() { raw[i] = b }
    raw[pathBytes.count] = 0
}

/// Sends `descriptor` over fd 3 with one byte of data.
func pass(_ descriptor: Int32) {
    // struct cmsghdr { size_t cmsg_len; int cmsg_level; int cmsg_type; } + one int, 8-byte aligned.
    let headerSize = MemoryLayout<Int>.size + 2 * MemoryLayout<Int32>.size
    var control = [UInt8](repeating: 0, count: headerSize + 8)
    control.withUnsafeMutableBytes { raw in
        raw.storeBytes(of: headerSize + MemoryLayout<Int32>.size, toByteOffset: 0, as: Int.self)
        raw.storeBytes(of: SOL_SOCKET, toByteOffset: MemoryLayout<Int>.size, as: Int32.self)
        raw.storeBytes(of: Int32(SCM_RIGHTS), toByteOffset: MemoryLayout<Int>.size + 4, as: Int32.self)
        raw.storeBytes(of: descriptor, toByteOffset: headerSize, as: Int32.self)
    }
    var byte: UInt8 = 0x2A
    let sent = withUnsafeMutablePointer(to: &byte) { bytePointer in
        control.withUnsafeMutableBytes { controlRaw in
            var vector = iovec(iov_base: UnsafeMutableRawPointer(bytePointer), iov_len: 1)
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var message = msghdr()
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                message.msg_control = controlRaw.baseAddress
                message.msg_controllen = controlRaw.count
                return sendmsg(3, &message, 0)
            }
        }
    }
    guard sent == 1 else { fail("sendmsg") }
}

for _ in 0..<count {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { fail("socket") }
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else { fail("connect \(path)") }
    pass(fd)
    close(fd)
}
exit(0)

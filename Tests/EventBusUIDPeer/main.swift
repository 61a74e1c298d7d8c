// eventbus-uid-peer SOCKET COUNT: connects COUNT times to the broker at
// SOCKET and hands each connected socket to its parent over fd 3 (one byte
// and one SCM_RIGHTS descriptor per message: EventBusTestSupport's
// `sendDescriptor`, the other half of `connectAs`), then exits. Run
// through `setpriv --reuid N --regid N --clear-groups`, the connections carry
// uid N in SO_PEERCRED (taken at connect time), while the test drives them
// itself (EventBusTestSupport `connectAs`). Exit 0 when all were passed; 1
// with a line on stderr otherwise.
import EventBusTestSupport
import Glibc

func fail(_ message: String) -> Never {
    let text = "eventbus-uid-peer: \(message) (errno \(errno))\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 3, let count = Int(arguments[2]) else { fail("usage: eventbus-uid-peer SOCKET COUNT") }
let path = arguments[1]

guard var address = try? unixAddress(path) else { fail("socket path too long") }

for _ in 0..<count {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { fail("socket") }
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else { fail("connect \(path)") }
    guard sendDescriptor(fd, over: 3) else { fail("sendmsg") }
    close(fd)
}
exit(0)

// Which access-policy files this broker reads (docs/POLICY.md "Files"), and
// `eventbusd --check-policy`.
//
// Before editing: the broker is the system bus when the path it binds is
// /run/eventbus/bus.sock (`--system`, or the automatic choice as root), or,
// under socket activation, when `--system` is given (the shipped
// eventbus.service passes it) or a passed socket is bound to that path. Only
// the system bus reads files without `--policy`; the per-user bus reads none.
import EventBusCommandLine
import EventBusPolicy
@_spi(Package) import EventBusProtocol
import EventBusServer
import EventBusSystem
import EventBusSystemd

/// The files the broker reads: `--policy` files if given, else the system
/// bus's defaults on the system bus, else none.
/// - Parameters:
///   - boundPath: the path the broker will bind (nil under socket activation).
///   - activated: the sockets passed by systemd, if any.
func selectPolicyFiles(_ options: BrokerOptions, boundPath: String?, activated: [ActivatedSocket]?) -> PolicyFiles {
    if !options.policyFiles.isEmpty { return .explicit(options.policyFiles) }
    var systemBus = boundPath == SocketPath.systemBus
    if let activated {
        systemBus = options.bus == .system || activated.contains {
            (try? FileDescriptor(rawValue: $0.fd).localPath()) == SocketPath.systemBus
        }
    }
    return systemBus ? .systemBus(vendorFile: PolicyFiles.vendorFile()) : .none
}

/// `eventbusd --check-policy [FILE...]`: reads FILE... (default: what this
/// command line would read), prints the effective policy
/// (`AccessPolicy.renderEffective`) and returns `.success`, or prints every
/// error as `file:line: message` to stderr and returns `.config` (78).
func checkPolicy(_ options: BrokerOptions) -> ExitStatus {
    let files: PolicyFiles
    if !options.checkFiles.isEmpty {
        files = .explicit(options.checkFiles)
    } else {
        let path = try? SocketPath.resolve(options.bus, environment: ProcessEnvironment.variables(), effectiveUID: ProcessIdentity.effectiveUID)
        files = selectPolicyFiles(options, boundPath: path, activated: nil)
    }
    if let vendor = files.missingVendorFile {
        writeStandardError("eventbusd: warning: the system bus's vendor policy \(vendor) is missing\n")
    }
    switch files.load(brokerUID: ProcessIdentity.current.uid) {
    case .success(let policy):
        print(policy.renderEffective(), terminator: "")
        return .success
    case .failure(let error):
        writeStandardError(error.lines.map { $0 + "\n" }.joined())
        return .config
    }
}

/// Writes `text` to fd 2 (the global `stderr` is not concurrency-safe).
private func writeStandardError(_ text: String) {
    let bytes = Array(text.utf8)
    _ = try? FileDescriptor.standardError.writeAll(bytes.span.bytes)
}

// Which access-policy files a broker reads, in which order, and reading them
// all or nothing (PROTOCOL.md "Access policy (1.1)"; docs/POLICY.md "Files"):
// at start, on SIGHUP, and for `eventbusd --check-policy`.
//
// Before editing: reading is blocking file I/O plus NSS lookups of `user=`
// and `group=` names; it runs on the loop thread only at start and on SIGHUP.
// A file the list names explicitly must exist; of the system bus's defaults,
// only the ones that exist are read (a missing vendor file is the caller's to
// warn about, see `missingVendorFile`).
import EventBusPolicy
import EventBusSystem

/// The policy files of a broker.
///
/// Example: the system bus installed under /usr/local reads
/// `/usr/local/share/eventbus/policy.conf`, then `/etc/eventbus/policy.conf`
/// if it exists, then `/etc/eventbus/policy.d/*.conf` in lexical order.
package enum PolicyFiles: Equatable, Sendable {
    /// No policy file: everything allowed, `bridge` for uid 0 and the
    /// broker's uid (the per-user bus).
    case none
    /// `--policy FILE...`: these, in this order; each must exist.
    case explicit([String])
    /// The system bus's defaults: the vendor file (if it exists), then the
    /// administrator's files in `configDirectory`.
    case systemBus(vendorFile: String?, configDirectory: String = PolicyFiles.systemConfigDirectory)

    /// Where the administrator's files live: `policy.conf` and `policy.d/`.
    package static let systemConfigDirectory = "/etc/eventbus"

    /// The vendor file of an installed broker: `PREFIX/share/eventbus/policy.conf`
    /// for a broker at `PREFIX/bin/eventbusd` (where `scripts/install` puts
    /// config/policy.conf), found from the running executable's path.
    /// - Returns: nil when the executable's path cannot be read.
    package static func vendorFile(executablePath: String? = FileSystem.executablePath()) -> String? {
        guard let executablePath else { return nil }
        let binDirectory = FileSystem.parentDirectory(of: executablePath)
        let prefix = FileSystem.parentDirectory(of: binDirectory)
        return (prefix == "/" ? "" : prefix) + "/share/eventbus/policy.conf"
    }

    /// The system bus's vendor file when it is named but absent (a broker
    /// run from a build folder, or an incomplete install), for a warning.
    package var missingVendorFile: String? {
        guard case .systemBus(let vendor?, _) = self, (try? FileSystem.kind(ofPath: vendor)) == .missing else { return nil }
        return vendor
    }

    /// The files to read now, in order.
    /// - Throws: `PolicyFilesError` when `policy.d` exists but cannot be listed.
    package func paths() throws(PolicyFilesError) -> [String] {
        switch self {
        case .none:
            return []
        case .explicit(let paths):
            return paths
        case .systemBus(let vendor, let directory):
            var paths: [String] = []
            func addIfPresent(_ path: String) {
                if (try? FileSystem.kind(ofPath: path)) != .missing { paths.append(path) }
            }
            if let vendor { addIfPresent(vendor) }
            addIfPresent(directory + "/policy.conf")
            let dropIns = directory + "/policy.d"
            let names: [String]?
            do {
                names = try FileSystem.directoryEntries(dropIns)
            } catch {
                throw PolicyFilesError(lines: ["\(dropIns): cannot list the directory: \(error)"])
            }
            for name in names ?? [] where name.hasSuffix(".conf") && !name.hasPrefix(".") {
                paths.append(dropIns + "/" + name)
            }
            return paths
        }
    }

    /// Reads and parses every file, all or nothing.
    /// - Parameter brokerUID: the broker's own uid (no per-uid limits; may
    ///   `bridge` without a policy file).
    /// - Returns: the policy, or every error: an unreadable file
    ///   (`/etc/eventbus/policy.d/x.conf: open: Permission denied`) or each
    ///   invalid line (`file:line: message`).
    package func load(brokerUID: UInt32) -> Result<AccessPolicy, PolicyFilesError> {
        let paths: [String]
        do {
            paths = try self.paths()
        } catch {
            return .failure(error)
        }
        var sources: [PolicySource] = []
        var unreadable: [String] = []
        for path in paths {
            do {
                let bytes = try FileSystem.readFile(path, maxBytes: 4 << 20)
                sources.append(PolicySource(path: path, text: String(decoding: bytes, as: UTF8.self)))
            } catch {
                unreadable.append("\(path): cannot read the policy file: \(error)")
            }
        }
        guard unreadable.isEmpty else { return .failure(PolicyFilesError(lines: unreadable)) }
        do {
            return .success(try AccessPolicy.load(sources, resolver: SystemNameResolver(), brokerUID: brokerUID))
        } catch {
            return .failure(PolicyFilesError(lines: error.errors.map(\.description)))
        }
    }
}

/// Why policy files gave no policy: one line per problem, each naming the
/// file (and the line, for an invalid line).
package struct PolicyFilesError: Error, Equatable, Sendable, CustomStringConvertible {
    /// E.g. `/etc/eventbus/policy.conf:3: unknown action "publsh" (expected connect, publish, subscribe, bridge, hold or serve)`.
    package var lines: [String]

    package init(lines: [String]) { self.lines = lines }

    package var description: String { lines.joined(separator: "\n") }
}

/// `user=` and `group=` names through the system's databases
/// (getpwnam_r(3), getgrnam_r(3)), looked up when a file is read.
package struct SystemNameResolver: PolicyNameResolver, Sendable {
    package init() {}

    package func uid(ofUser name: String) -> UInt32? { UserDatabase.uid(ofUser: name) }
    package func gid(ofGroup name: String) -> UInt32? { UserDatabase.gid(ofGroup: name) }
}

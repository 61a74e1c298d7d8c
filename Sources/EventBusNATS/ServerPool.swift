// The servers this client may connect to, as nats.go keeps them
// (nats-io/nats.go nats.go `processInfo`, `selectNextServer`, `shufflePool`):
// the configured seeds, plus the servers INFO's `connect_urls` made known.
//
// Before editing: seeds are never removed; a discovered ("implicit") server
// leaves the pool when a later INFO no longer lists it, unless it is the
// server we are connected to. An INFO without `connect_urls` changes nothing.
// New servers are shuffled in, but the first entry stays first.
@_spi(Package) import EventBusProtocol

/// A NATS server address: host (name or IP literal, no brackets) and port.
package struct ServerAddress: Hashable, Sendable, CustomStringConvertible {
    package let host: String
    package let port: UInt16

    package init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `nats://host:port`, `host:port`, `host` (port 4222), `[::1]:4222`.
    /// Nil for another scheme, an empty host or a bad port. Credentials
    /// (`nats://user:pass@host`) are not supported here.
    package init?(url text: String) {
        var rest = Substring(text.trimmingSpaces())
        if let range = rest.firstRange(of: "://") {
            guard rest[..<range.lowerBound].lowercased() == "nats" else { return nil }
            rest = rest[range.upperBound...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("@"), !rest.contains("/") else { return nil }
        var host: Substring
        var portText: Substring? = nil
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            guard rest.firstIndex(of: ":") == colon else { return nil }  // a bare IPv6 literal needs brackets
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "\t" }) else { return nil }
        var port: UInt16 = 4222
        if let portText {
            guard let value = UInt16(portText), value > 0 else { return nil }
            port = value
        }
        self.host = String(host)
        self.port = port
    }

    /// `host:port` as INFO's `connect_urls` spells it (`[::1]:4222` for IPv6).
    package var hostPort: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// `nats://host:port`.
    package var description: String { "nats://" + hostPort }
}

/// One entry of the pool.
package struct PoolEntry: Equatable, Sendable {
    package var address: ServerAddress
    /// Learnt from `connect_urls` rather than configured.
    package var isImplicit: Bool
}

/// The ordered pool of servers; the first entry is the next to try.
package struct ServerPool: Equatable, Sendable {
    package private(set) var entries: [PoolEntry]

    /// A pool of the seeds, duplicates removed, shuffled when `randomize` (as nats.go does unless `NoRandomize`).
    /// - Precondition: `seeds` is not empty.
    package init(seeds: [ServerAddress], randomize: Bool, random: inout SplitMix64) {
        precondition(!seeds.isEmpty, "a NATS client needs at least one server")
        var seen: Set<String> = []
        entries = seeds.filter { seen.insert($0.hostPort).inserted }.map { PoolEntry(address: $0, isImplicit: false) }
        if randomize { entries.shuffle(using: &random) }
    }

    package var count: Int { entries.count }

    /// The server to try next.
    package var first: ServerAddress { entries[0].address }

    /// Moves `current` to the end of the pool (nats.go `selectNextServer`)
    /// and returns the new first entry: the next server to try.
    package mutating func rotate(after current: ServerAddress) -> ServerAddress {
        if let index = entries.firstIndex(where: { $0.address.hostPort == current.hostPort }) {
            let entry = entries.remove(at: index)
            entries.append(entry)
        }
        return entries[0].address
    }

    /// Applies INFO's `connect_urls`: implicit servers no longer listed leave
    /// (except `current`), listed ones not in the pool join as implicit, and
    /// if any joined, all but the first entry are shuffled (when `randomize`).
    /// An empty list changes nothing (a server may omit the field).
    /// - Returns: the servers that joined.
    @discardableResult
    package mutating func apply(connectURLs: [String], current: ServerAddress?, randomize: Bool, random: inout SplitMix64) -> [ServerAddress] {
        guard !connectURLs.isEmpty else { return [] }
        var listed: [String: ServerAddress] = [:]
        for url in connectURLs {
            if let address = ServerAddress(url: url) { listed[address.hostPort] = address }
        }
        entries.removeAll { entry in
            entry.isImplicit && listed[entry.address.hostPort] == nil && entry.address.hostPort != current?.hostPort
        }
        let known = Set(entries.map(\.address.hostPort))
        var joined: [ServerAddress] = []
        for url in connectURLs {
            guard let address = ServerAddress(url: url), !known.contains(address.hostPort),
                  !joined.contains(where: { $0.hostPort == address.hostPort }) else { continue }
            joined.append(address)
            entries.append(PoolEntry(address: address, isImplicit: true))
        }
        if !joined.isEmpty && randomize && entries.count > 2 {
            var rest = Array(entries.dropFirst())
            rest.shuffle(using: &random)
            entries = [entries[0]] + rest
        }
        return joined
    }
}

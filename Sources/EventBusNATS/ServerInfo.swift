// The INFO a NATS server sends on connect and, to a client that said
// `protocol:1`, again whenever the cluster changes (nats-io/nats.docs
// reference/nats-protocol "INFO"; nats-server server.go `type Info`).
//
// Before editing: unknown fields are ignored and missing ones keep their
// defaults, so a newer or older server never fails the parse; only text that
// is not one JSON object is an error.
@_spi(Package) import EventBusProtocol

/// The fields of INFO this client uses. Example (nats-server 2.9.10, a cluster node):
/// `INFO {"server_id":"NDMY…","server_name":"n1","version":"2.9.10","proto":1,"go":"go1.19.8","host":"127.0.0.1","port":15221,"headers":true,"max_payload":1048576,"client_id":8,"client_ip":"127.0.0.1","cluster":"c1","connect_urls":["127.0.0.1:15221","127.0.0.1:15222","127.0.0.1:15223"]} `
/// (2.9.10 ends the line with a space before the CRLF).
package struct ServerInfo: Equatable, Sendable {
    package var serverID = ""
    package var serverName = ""
    package var version = ""
    /// `proto`: 1 when the server sends asynchronous INFOs and knows `echo`.
    package var proto = 0
    /// Whether the server supports HPUB/HMSG.
    package var headers = false
    /// `max_payload`: the largest message (header block plus payload, bytes) it
    /// accepts; more closes the connection (`-ERR 'Maximum Payload Violation'`).
    package var maxPayload = 1 << 20
    package var clientID: UInt64 = 0
    package var clientIP = ""
    package var cluster = ""
    /// `connect_urls`: `host:port` of the cluster's client listeners (empty when absent).
    package var connectURLs: [String] = []
    /// `ldm`: the server entered lame duck mode and will close its clients.
    package var lameDuckMode = false
    package var authRequired = false
    package var tlsRequired = false
    package var jetStream = false

    package init() {}

    /// Parses the JSON object of an INFO line.
    /// - Throws: `ProtocolViolation` when it is not one JSON object.
    package init(json bytes: RawSpan) throws(ProtocolViolation) {
        let members: [JSONMember]
        do {
            members = try JSONObject.members(bytes)
        } catch {
            throw ProtocolViolation("INFO is not a JSON object: \(error)")
        }
        for member in members {
            let token = member.value
            switch member.key {
            case "server_id": serverID = ServerInfo.string(bytes, token) ?? serverID
            case "server_name": serverName = ServerInfo.string(bytes, token) ?? serverName
            case "version": version = ServerInfo.string(bytes, token) ?? version
            case "proto": proto = ServerInfo.integer(bytes, token).map { Int(clamping: $0) } ?? proto
            case "headers": headers = ServerInfo.bool(token) ?? headers
            case "max_payload":
                if let value = ServerInfo.integer(bytes, token), value > 0 { maxPayload = Int(clamping: value) }
            case "client_id": clientID = ServerInfo.integer(bytes, token) ?? clientID
            case "client_ip": clientIP = ServerInfo.string(bytes, token) ?? clientIP
            case "cluster": cluster = ServerInfo.string(bytes, token) ?? cluster
            case "connect_urls": connectURLs = ServerInfo.strings(bytes, token)
            case "ldm": lameDuckMode = ServerInfo.bool(token) ?? lameDuckMode
            case "auth_required": authRequired = ServerInfo.bool(token) ?? authRequired
            case "tls_required": tlsRequired = ServerInfo.bool(token) ?? tlsRequired
            case "jetstream": jetStream = ServerInfo.bool(token) ?? jetStream
            default: break
            }
        }
    }

    static func string(_ bytes: RawSpan, _ token: JSONToken) -> String? {
        guard case .string = token.kind else { return nil }
        return JSONString.decode(bytes, token)
    }

    static func bool(_ token: JSONToken) -> Bool? {
        switch token.kind {
        case .true: true
        case .false: false
        default: nil
        }
    }

    /// A non-negative integer that fits in 64 bits, else nil.
    static func integer(_ bytes: RawSpan, _ token: JSONToken) -> UInt64? {
        guard case .number(integer: true) = token.kind, token.count <= 20 else { return nil }
        return UInt64(String(decodingUTF8: bytes.extracting(token.start..<token.end)))
    }

    /// The string elements of an array token (other elements skipped).
    static func strings(_ bytes: RawSpan, _ token: JSONToken) -> [String] {
        guard case .array = token.kind else { return [] }
        // The token was validated by `JSONObject.members`, so this cannot fail.
        let elements = (try? JSONArray.elements(bytes, token, maxDepth: 512)) ?? []
        return elements.compactMap { string(bytes, $0) }
    }
}

/// The server broke the client protocol (a line we cannot parse, a size out of
/// range). The connection cannot be trusted to be in step any more: close it.
package struct ProtocolViolation: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong, e.g. `MSG line has 1 field(s)`.
    package let description: String

    package init(_ description: String) { self.description = description }
}

// `ConnectionInfo`: what the broker said in its `hello` reply.

/// What the broker said in its `hello` reply (PROTOCOL.md "Requests").
public struct ConnectionInfo: Equatable, Sendable {
    /// The broker's name, e.g. `eventbusd`.
    public var server: String
    /// The broker's version string.
    public var version: String
    /// The random id of this broker run; it changes when the broker restarts.
    public var instance: String
    /// This connection's id within the broker run.
    public var connection: UInt64
    /// Optional features the broker has, e.g. `overflow`, `echo`; (1.2)
    /// `flow` when it holds publishers for subscribers that keep reading.
    public var features: [String]
    /// (1.2) The broker's process id; nil from a 1.1 broker.
    public var pid: Int32?

    /// The fields of a `hello` reply.
    public init(server: String, version: String, instance: String, connection: UInt64, features: [String], pid: Int32? = nil) {
        self.server = server
        self.version = version
        self.instance = instance
        self.connection = connection
        self.features = features
        self.pid = pid
    }
}

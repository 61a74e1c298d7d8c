// The release number of this package, written once: `eventbusd --version`,
// `eventbus --version` and the `version` field of the broker's `hello` reply
// (PROTOCOL.md "Requests") all read it from here.
//
// Before editing: this is the software's version, not the wire protocol's
// (that is `ProtocolConstants.version`); change it when cutting a release.

/// The package's release.
public enum EventBusRelease {
    /// Semantic version of this release, e.g. `"0.1.0"`.
    public static let version = "0.1.0"
}

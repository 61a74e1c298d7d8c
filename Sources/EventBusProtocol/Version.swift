// The release number of this package, written once: `eventbusd --version`,
// `eventbus --version`, `eventbus-bridge --version`, the `version` field of
// the broker's `hello` reply (PROTOCOL.md "Requests"), the Debian packages
// (scripts/package) and the Python package (clients/python, checked by
// VersionTests) all read it from here.
//
// Before editing: the version follows the protocol edition it implements
// (README "Versions"): MAJOR.MINOR is the edition of docs/PROTOCOL.md (1.3 is
// the fourth edition), PATCH counts the releases within one edition. When an
// edition is implemented, set MAJOR.MINOR to it and PATCH to 0, and add its
// section to CHANGELOG.md. This is not the `protocol` number of `hello`
// (`ProtocolConstants.version`, 1 for every edition so far).

/// The package's release.
@_spi(Package) public enum EventBusRelease {
    /// Semantic version of this release: `"1.3.0"`.
    @_spi(Package) public static let version = "1.3.0"

    /// The edition of the wire protocol this release implements: the version's
    /// first two numbers, `"1.3"`.
    @_spi(Package) public static var protocolEdition: String {
        version.split(separator: ".").prefix(2).joined(separator: ".")
    }

    /// The edition as PROTOCOL.md names it: `"fourth edition"` for 1.3
    /// (1.0 is the first).
    @_spi(Package) public static var protocolEditionName: String {
        let ordinals = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"]
        let minor = Int(protocolEdition.split(separator: ".").last ?? "") ?? -1
        return ordinals.indices.contains(minor) ? "\(ordinals[minor]) edition" : "edition \(protocolEdition)"
    }

    /// Every optional feature the broker of this build can list in `hello`:
    /// `ProtocolConstants.features` and the retention ones (`retain`, and
    /// `history` while the history is on: EventBusCore's `retentionFeatures`).
    @_spi(Package) public static var features: [String] {
        ProtocolConstants.features + ["retain", "history"]
    }

    /// What `PROGRAM --version` prints (every program the same three lines):
    /// ```
    /// eventbusd 1.3.0
    /// protocol 1, edition 1.3 (fourth edition of docs/PROTOCOL.md)
    /// features: overflow echo drop-notice ...
    /// ```
    @_spi(Package) public static func versionText(program: String) -> String {
        """
        \(program) \(version)
        protocol \(ProtocolConstants.version), edition \(protocolEdition) (\(protocolEditionName) of docs/PROTOCOL.md)
        features: \(features.joined(separator: " "))

        """
    }
}

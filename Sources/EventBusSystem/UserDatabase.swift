// User and group names to numbers (getpwnam_r(3), getgrnam_r(3)), for the
// access policy's `user=` and `group=` names, which are resolved when a policy
// file is read (PROTOCOL.md "Access policy (1.1)").
//
// Before editing: these go through NSS (files, systemd's DynamicUser names,
// LDAP...), so they may be slow: call them when reading a policy, never per
// connection or per event.
//
// Raw memory (issue 35): `lookUp` owns the string buffer getpwnam_r/getgrnam_r
// fill (allocated for one call, grown on ERANGE, freed before it returns);
// only the number is read out of the record.
import Glibc

/// The system's user and group databases.
package enum UserDatabase {
    /// getpwnam_r(3): the uid of user `name`.
    /// - Returns: nil when there is no such user, or when the lookup failed
    ///   (e.g. an NSS service is unreachable): either way the name cannot be
    ///   used. ERANGE is retried with a larger buffer.
    package static func uid(ofUser name: String) -> UInt32? {
        var entry = passwd()
        return lookUp { buffer, size in
            var result: UnsafeMutablePointer<passwd>? = nil
            let code = getpwnam_r(name, &entry, buffer, size, &result)
            return (code, result == nil ? nil : entry.pw_uid)
        }
    }

    /// getpwnam_r(3): the primary gid of user `name`.
    /// - Returns: nil when there is no such user or the lookup failed.
    package static func primaryGID(ofUser name: String) -> UInt32? {
        var entry = passwd()
        return lookUp { buffer, size in
            var result: UnsafeMutablePointer<passwd>? = nil
            let code = getpwnam_r(name, &entry, buffer, size, &result)
            return (code, result == nil ? nil : entry.pw_gid)
        }
    }

    /// getgrnam_r(3): the gid of group `name`.
    /// - Returns: nil when there is no such group or the lookup failed (see
    ///   `uid(ofUser:)`).
    package static func gid(ofGroup name: String) -> UInt32? {
        var entry = group()
        return lookUp { buffer, size in
            var result: UnsafeMutablePointer<group>? = nil
            let code = getgrnam_r(name, &entry, buffer, size, &result)
            return (code, result == nil ? nil : entry.gr_gid)
        }
    }

    /// Runs a `get*_r` call with a scratch buffer, doubling it on ERANGE (up
    /// to 1 MiB). The calls return their error number instead of setting
    /// errno (and do not document EINTR), so `systemCall` does not apply.
    private static func lookUp(_ call: (UnsafeMutablePointer<CChar>, Int) -> (Int32, UInt32?)) -> UInt32? {
        var size = 1024
        while size <= 1 << 20 {
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let (code, value) = call(buffer, size)
            switch code {
            case 0: return value
            case ERANGE: size *= 2
            default: return nil
            }
        }
        return nil
    }
}

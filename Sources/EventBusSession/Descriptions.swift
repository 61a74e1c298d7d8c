// How the session's public values print (issue 34): one readable line each,
// for logs and `print(notice)`, instead of the default reflection
// (`ConnectionInfo(server: ..., ...)` with module-qualified names).
//
// Before editing: keep each one line; name the fields a reader needs to act
// (the broker's instance and pid, the seqs of a gap).

extension ConnectionInfo: CustomStringConvertible {
    /// E.g. `eventbusd 1.3.0, instance 5f1c..., connection 7, pid 812, features flow,history`.
    public var description: String {
        var text = "\(server) \(version), instance \(instance), connection \(connection)"
        if let pid { text += ", pid \(pid)" }
        if !features.isEmpty { text += ", features \(features.joined(separator: ","))" }
        return text
    }
}

extension BusGap: CustomStringConvertible {
    /// E.g. `events after seq 41 could not be recovered (the broker restarted; its history starts at seq 1)`.
    public var description: String {
        let why = brokerRestarted ? "the broker restarted" : "the broker's history no longer reaches back"
        return "events after seq \(sinceSeq) could not be recovered (\(why); its history starts at seq \(firstSeq))"
    }
}

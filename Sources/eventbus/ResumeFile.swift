// `eventbus listen --resume FILE`: where a listener got to, kept in FILE
// between runs as one JSON line, `{"instance":"9f2c4e01d3b7a865","seq":42}`
// (PROTOCOL.md "Retained events and history (1.1)": `since` and `instance`).
//
// Before editing: the file is replaced atomically (a temporary file renamed
// over it, DurableFile), never written in place, so a listener killed at any
// moment leaves the old position or the new one. It is written after the
// events it covers were printed: a crash may print an event twice on the
// next run, never skip one.
@_spi(Package) import EventBusCLI
@_spi(Package) import EventBusProtocol
import EventBusSession
import EventBusSystem

enum ResumeFile {
    /// The position saved in `path`, nil when the file does not exist yet.
    /// - Throws: `CLIError` 74 when it cannot be read, 65 when it is not a
    ///   position this command wrote.
    /// The position `{"instance":"...","seq":42}` holds, nil when it is not one.
    private static func position(in bytes: RawSpan) -> StreamPosition? {
        guard let members = try? JSONObject.members(bytes),
              let seqToken = members.first(where: { $0.key == "seq" })?.value,
              let seq = JSONInteger.unsigned(bytes, seqToken) else { return nil }
        var instance: String? = nil
        if let value = members.first(where: { $0.key == "instance" })?.value, value.isString { instance = JSONString.decode(bytes, value) }
        return StreamPosition(instance: instance, seq: seq)
    }

    static func read(_ path: String) throws(CLIError) -> StreamPosition? {
        let contents: (bytes: [UInt8], truncated: Bool)?
        do {
            contents = try DurableFile.read(path, maxBytes: 4096)
        } catch {
            throw CLIError(.ioError, "cannot read the resume file \(path): \(error.errno)")
        }
        guard let contents else { return nil }
        guard !contents.truncated, let position = position(in: contents.bytes.span.bytes) else {
            throw CLIError(.dataError, "the resume file \(path) does not hold a position like {\"instance\":\"...\",\"seq\":42}; remove it to start afresh")
        }
        return position
    }

    /// Replaces `path` with `position`.
    /// - Throws: `CLIError` 74 when it cannot be written.
    static func write(_ position: StreamPosition, to path: String) throws(CLIError) {
        var line: [UInt8] = []
        FrameEncoder.appendASCII("{", to: &line)
        if let instance = position.instance {
            FrameEncoder.appendASCII("\"instance\":", to: &line)
            JSONString.appendQuoted(instance, to: &line)
            line.append(0x2C)
        }
        FrameEncoder.appendASCII("\"seq\":", to: &line)
        FrameEncoder.appendInt(position.seq, to: &line)
        FrameEncoder.appendASCII("}\n", to: &line)
        do throws(SystemError) {
            try DurableFile.replace(path, with: line.span.bytes, durable: false)
        } catch {
            throw CLIError(.ioError, "cannot write the resume file \(path): \(error)")
        }
    }
}

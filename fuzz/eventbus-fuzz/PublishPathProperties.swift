// The broker's specialised publish path against the general decoder, on
// every frame: `RequestDecoder.decodeCommonPublish` (PublishScanner.swift)
// accepts a frame only when `RequestDecoder.decode` makes a publish of it,
// with the same `req` and the same request (type, every token, retain);
// it accepts every frame of the common shape (so the fast path does not
// silently stop being taken); and the quick value scan it uses
// (`JSONScanner.validateQuickly`) agrees with `JSONScanner.validate` on the
// verdict and the token of every input.
//
// Before editing: a violated property must trap (`fuzzFailure`). The
// shape's definition here is written from the general decoder's result, not
// from the scanner's code, so the two can disagree.
@_spi(Package) import EventBusProtocol

enum PublishPathProperties {
    /// How often the specialised path took a frame, and how often it left
    /// one to the general decoder (for `--stats`).
    nonisolated(unsafe) static var taken = 0
    nonisolated(unsafe) static var leftToGeneral = 0

    /// The top-level keys of the common shape, unescaped.
    static let shapeKeys: Set<[UInt8]> = Set(["op", "type", "req", "data", "source", "id", "retain", "origin"].map { Array($0.utf8) })

    static func check(_ frame: [UInt8]) {
        frame.withUnsafeBytes { bytes in
            checkQuickScan(bytes)
            let general = RequestDecoder.decode(bytes.bytes)
            guard let special = RequestDecoder.decodeCommonPublish(bytes.bytes) else {
                leftToGeneral += 1
                if isCommonShape(bytes, general) {
                    fuzzFailure("the specialised path left a frame of its shape to the general decoder: \(FuzzInput.preview(frame))")
                }
                return
            }
            taken += 1
            guard case .success(.publish(let expected)) = general.request else {
                fuzzFailure("the specialised path made a publish of a frame the general decoder answers \(general.request): \(FuzzInput.preview(frame))")
            }
            guard case .success(.publish(let got)) = special.request, got == expected, special.req == general.req else {
                fuzzFailure("""
                    the specialised path reads the frame differently: \(FuzzInput.preview(frame))
                      specialised: req \(String(describing: special.req)), \(special.request)
                      general:     req \(String(describing: general.req)), \(general.request)
                    """)
            }
        }
    }

    /// The general decoder made a publish of it, and every top-level key is
    /// one of the shape's, unescaped, as are `op` and `type`.
    static func isCommonShape(_ bytes: UnsafeRawBufferPointer, _ decoded: DecodedFrame) -> Bool {
        guard case .success(.publish) = decoded.request else { return false }
        var plain = true
        var op: JSONToken? = nil, type: JSONToken? = nil
        do {
            try JSONObject.scan(bytes.bytes) { key, value in
                guard case .string(escaped: false) = key.kind else { plain = false; return }
                let name = Array(bytes[(key.start + 1)..<(key.end - 1)])
                if !shapeKeys.contains(name) { plain = false }
                if name == Array("op".utf8) { op = value }
                if name == Array("type".utf8) { type = value }
            }
        } catch {
            fuzzFailure("the general decoder made a publish of a frame JSONObject.scan rejects: \(error)")
        }
        guard plain, let op, let type, case .string(escaped: false) = op.kind, case .string(escaped: false) = type.kind else { return false }
        return true
    }

    /// `validateQuickly` and `validate`: the same verdict and token, at the
    /// protocol's nesting limit and at a small one (so the limit is reached).
    static func checkQuickScan(_ bytes: UnsafeRawBufferPointer) {
        for maxDepth in [ProtocolConstants.maxDepth, 3] {
            for lineSafe in [false, true] {  // (the broker's requests: lineSafe)
                let quick = JSONScanner.validateQuickly(bytes.bytes, maxDepth: maxDepth, lineSafe: lineSafe)
                let full = try? JSONScanner.validate(bytes.bytes, maxDepth: maxDepth, lineSafe: lineSafe)
                if quick != full {
                    fuzzFailure("maxDepth \(maxDepth), lineSafe \(lineSafe): quick scan \(String(describing: quick)), full scan \(String(describing: full)): \(FuzzInput.preview(Array(bytes)))")
                }
            }
        }
    }
}

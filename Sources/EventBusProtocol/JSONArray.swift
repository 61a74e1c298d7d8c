// Reading the elements of one JSON array inside bytes already validated
// (a broker reply's `clients`, `types`, `groups`; an INFO's `connect_urls`),
// for clients and the bridge: the span form of `JSONScanner.scanElements`.
//
// Before editing: allocates one array of tokens; not for the broker's
// per-event path. The scanner's view lives for the call only (it holds a
// `ByteView`, ByteView.swift, until a span can be stored in a struct, issue 35).

@_spi(Package) public enum JSONArray {
    /// The tokens of the elements of the array `array` (a token of `bytes`), in order.
    /// - Throws: `JSONSyntaxError` when the array is not valid JSON.
    @_spi(Package) public static func elements(_ bytes: RawSpan, _ array: JSONToken, maxDepth: Int = ProtocolConstants.maxDepth) throws(JSONSyntaxError) -> [JSONToken] {
        try bytes.withByteView { (raw) throws(JSONSyntaxError) -> [JSONToken] in
            var scanner = JSONScanner(raw, maxDepth: maxDepth)
            scanner.position = array.start
            var items: [JSONToken] = []
            try scanner.scanElements(depth: 1) { items.append($0) }
            return items
        }
    }
}

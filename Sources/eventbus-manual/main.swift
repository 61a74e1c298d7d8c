// eventbus-manual: writes the generated man pages and shell completions
// (EventBusManual's `ManualFiles`) under a repository root, or with --check
// lists the ones that differ and exits 1. Not installed; run from the root:
//   swift run eventbus-manual           # rewrite man/ and completions/
//   swift run eventbus-manual --check   # exit 1 if one is stale
import EventBusManual
import EventBusSystem
import Glibc

/// One line on standard error.
func complain(_ text: String) {
    let line = Array((text + "\n").utf8)
    try? FileDescriptor.standardError.writeAll(line.span.bytes)
}

var arguments = Array(CommandLine.arguments.dropFirst())
let check = arguments.first == "--check"
if check { arguments.removeFirst() }
guard arguments.count <= 1, !(arguments.first ?? "").hasPrefix("-") else {
    complain("usage: eventbus-manual [--check] [ROOT]")
    exit(64)
}
let root = arguments.first ?? "."
var stale: [String] = []
for file in ManualFiles.generated() {
    let path = root + "/" + file.path
    let current = (try? FileSystem.readFile(path, maxBytes: 1 << 24)).map { String(decoding: $0, as: UTF8.self) }
    guard current != file.text else { continue }
    stale.append(file.path)
    if check { continue }
    // The file's folders, from the root down.
    var folder = root
    for part in file.path.split(separator: "/").dropLast() {
        folder += "/" + part
        _ = mkdir(folder, 0o755)
    }
    guard let stream = fopen(path, "w"), fputs(file.text, stream) >= 0, fclose(stream) == 0 else {
        complain("eventbus-manual: cannot write \(path): \(String(cString: strerror(errno)))")
        exit(74)
    }
}
for path in stale { print((check ? "stale: " : "wrote ") + path) }
exit(check && !stale.isEmpty ? 1 : 0)

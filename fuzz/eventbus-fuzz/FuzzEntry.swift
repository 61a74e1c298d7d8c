// Entry points of eventbus-fuzz. Built with `-DEVENTBUS_FUZZER` and
// `--sanitize=fuzzer` (scripts/fuzz), libFuzzer supplies `main` and calls
// `LLVMFuzzerTestOneInput`; in a plain `swift build` the same properties run
// from a small replay driver over files and directories, so the target
// always links and a saved crash file can be replayed without libFuzzer.
//
// Before editing: the plain build must not define `LLVMFuzzerTestOneInput`
// and the fuzzer build must not define `main`.
import Foundation

#if EVENTBUS_FUZZER
/// libFuzzer's hook: runs every property on one input; traps on a violation.
@_cdecl("LLVMFuzzerTestOneInput")
package func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzInput.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
/// Replay driver: `eventbus-fuzz [--stats] PATH...` runs every property on each
/// file (directories are walked one level). Exit 0 when all hold; a violation
/// aborts with the property's message after the file's name.
@main
struct ReplayDriver {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let stats = arguments.first == "--stats"
        if stats { arguments.removeFirst() }
        if arguments.isEmpty || arguments.contains("--help") {
            print("usage: eventbus-fuzz [--stats] FILE|DIR...   (replays inputs; fuzzing: scripts/fuzz)")
            exit(arguments.isEmpty ? 64 : 0)
        }
        var files: [String] = []
        for path in arguments {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("eventbus-fuzz: no such file: \(path)\n".utf8))
                exit(66)
            }
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
                files += names.sorted().map { path + "/" + $0 }
            } else {
                files.append(path)
            }
        }
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            FuzzInput.current = file
            data.withUnsafeBytes { FuzzInput.run($0) }
        }
        print("\(files.count) inputs, every property held")
        if stats {
            print("differential: \(Differential.agreements) agreements without excuse")
            for reason in Disagreement.allCases {
                print("differential: \(Differential.counts[reason, default: 0]) excused as \(reason.rawValue)")
            }
            print("publish path: \(PublishPathProperties.taken) frames taken by the specialised path, \(PublishPathProperties.leftToGeneral) left to the general decoder")
        }
    }
}
#endif

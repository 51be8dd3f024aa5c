// Writes the notes migration fixtures Fixtures/v1, v2 and v3 through the frozen schema declarations
// (Tests/TestSupport/FrozenSchemas.swift), each with its SHA256SUMS. Committed fixtures are never rewritten: a
// version whose directory exists is skipped.
//
//     swift run notekit-fixtures Fixtures
import Foundation
import NoteKitTestSupport

let root = URL(fileURLWithPath: CommandLine.arguments.dropFirst().first ?? "Fixtures")
var failed = false
for version in 1...3 {
    let url = root.appendingPathComponent("v\(version)")
    if FileManager.default.fileExists(atPath: url.path) {
        print("\(url.path) exists; left as it is")
        continue
    }
    do {
        try NotesFixtureData.write(version: version, to: url)
        print("wrote \(url.path)")
    } catch {
        print("error: \(url.path): \(error)")
        failed = true
    }
}
exit(failed ? 1 : 0)

// Writes the notes migration fixtures Fixtures/v1 to v4 through the frozen schema declarations
// (Sources/NoteKitFixtures/FrozenSchemas.swift), each with its SHA256SUMS, in the store format this build writes
// (v1–v3 were written in format version 1, v4 in version 2). Committed fixtures are never rewritten: a
// version whose directory exists is skipped.
//
//     swift run notekit-fixtures Fixtures
import Foundation
import NoteKitFixtures

let root = URL(fileURLWithPath: CommandLine.arguments.dropFirst().first ?? "Fixtures")
var failed = false
for version in 1...4 {
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

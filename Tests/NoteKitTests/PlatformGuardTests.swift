import Foundation
import Testing

/// Issue 16, item 4: the sources have a Darwin path. NoteKit is built and tested on Linux only, so nothing compiles
/// the Darwin branches; this scan keeps the Linux-only spellings from coming back where they would break that build:
/// a platform module imported outside an `#if canImport(…)` / `#if os(…)` block, or without a Darwin (or Foundation)
/// branch beside it; a call qualified by a C library's module name outside such a block; a Linux-only call or field
/// used outside a Linux branch; and the `.rawValue` of a C constant that Glibc imports as an enum (`SOCK_STREAM`),
/// outside a Linux branch.
@Suite("Platforms: every platform import and Linux-only call is guarded, with a Darwin branch")
struct PlatformGuardTests {
    /// The package's root: this file is in Tests/NoteKitTests/.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("No Swift file under Sources/ or Tests/ imports a platform module or calls a Linux-only API unguarded")
    func sourcesAreGuarded() throws {
        var problems: [String] = []
        var scanned = 0
        let rootPath = Self.root.standardizedFileURL.path
        let thisFile = URL(fileURLWithPath: #filePath).standardizedFileURL.path
        for folder in ["Sources", "Tests"] {
            for file in try Self.swiftFiles(under: Self.root.appendingPathComponent(folder)) {
                // This file names what it looks for, in its lists and examples.
                guard file.standardizedFileURL.path != thisFile else { continue }
                let relative = String(file.standardizedFileURL.path.dropFirst(rootPath.count + 1))
                problems += PlatformGuardScanner.problems(in: try String(contentsOf: file, encoding: .utf8),
                                                          file: relative)
                scanned += 1
            }
        }
        #expect(scanned > 100, "the scan found the sources")
        #expect(problems.count == 0, "unguarded platform spellings:\n\(problems.joined(separator: "\n"))")
    }

    @Test("The scan flags an unguarded import, a module-qualified call, Linux-only names and a Glibc-only block")
    func scannerFlagsEachKind() {
        let source = """
            import FoundationEssentials
            import Glibc
            func f(_ descriptor: Int32) {
                _ = Glibc.close(descriptor)
                _ = fdatasync(descriptor)
                _ = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            }
            #if canImport(Glibc)
            import Glibc
            #endif
            """
        let problems = PlatformGuardScanner.problems(in: source, file: "Example.swift")
        #expect(problems.count == 6, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("Example.swift:1:") && $0.contains("FoundationEssentials") })
        #expect(problems.contains { $0.hasPrefix("Example.swift:2:") })
        #expect(problems.contains { $0.hasPrefix("Example.swift:4:") })
        #expect(problems.contains { $0.hasPrefix("Example.swift:5:") && $0.contains("fdatasync") })
        #expect(problems.contains { $0.hasPrefix("Example.swift:6:") && $0.contains("SOCK_STREAM") })
        #expect(problems.contains { $0.hasPrefix("Example.swift:8:") && $0.contains("no Darwin branch") })
    }

    @Test("The scan accepts guarded imports with a Darwin branch and Linux-only calls in a Linux branch")
    func scannerAcceptsGuardedCode() {
        let source = """
            #if canImport(FoundationEssentials)
            import FoundationEssentials
            #else
            import Foundation
            #endif
            #if canImport(Glibc)
            import Glibc
            #elseif canImport(Darwin)
            import Darwin
            #endif
            // A comment may say Glibc.close and fdatasync.
            func f(_ descriptor: Int32) -> Int32 {
                #if os(Linux)
                return fdatasync(descriptor)
                #elseif canImport(Darwin)
                return fcntl(descriptor, F_FULLFSYNC)
                #endif
            }
            func g(_ status: stat) -> Int {
                #if canImport(Darwin)
                Int(status.st_mtimespec.tv_sec)
                #else
                Int(status.st_mtim.tv_sec)
                #endif
            }
            enum Mood: String { case GOOD_DAY }
            let mood = Mood.GOOD_DAY.rawValue
            #if canImport(Glibc)
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            #else
            let descriptor = socket(AF_UNIX, SOCK_STREAM, 0)
            #endif
            """
        let problems = PlatformGuardScanner.problems(in: source, file: "Example.swift")
        #expect(problems.isEmpty, "\(problems)")
    }

    private static func swiftFiles(under folder: URL) throws -> [URL] {
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else {
            return []
        }
        var files: [URL] = []
        for case let url as URL in walker {
            // A nested package's build products are not sources.
            if url.lastPathComponent == ".build" { walker.skipDescendants(); continue }
            if url.pathExtension == "swift" { files.append(url) }
        }
        return files.sorted { $0.path < $1.path }
    }
}

/// A line scanner for `#if` blocks and the platform spellings inside and outside them. It reads directives and
/// imports line by line, as they are written in this repository (one directive or import per line).
enum PlatformGuardScanner {
    /// Modules that exist on some platforms only.
    static let platformModules: Set<String> = ["Glibc", "Musl", "Darwin", "FoundationEssentials", "Android",
                                               "Bionic", "WinSDK", "ucrt"]
    /// Imports of which a block needs a Darwin alternative beside it.
    static let linuxModules: Set<String> = ["Glibc", "Musl", "FoundationEssentials", "Android", "Bionic"]
    /// What serves as that alternative on Darwin.
    static let darwinModules: Set<String> = ["Darwin", "Foundation"]
    /// C library modules whose name qualifies a call (`Glibc.close`).
    static let qualifyingModules = ["Glibc", "Musl", "Darwin"]
    /// Calls, types and fields Glibc or Musl have and Darwin has not (Darwin spells `st_mtim` `st_mtimespec`).
    static let linuxOnlyNames = ["fdatasync", "posix_fallocate", "st_mtim", "st_atim", "st_ctim",
                                 "__rlimit_resource_t", "O_TMPFILE", "O_DIRECT", "sync_file_range", "renameat2"]

    private struct Block {
        let line: Int
        /// The conditions of its branches so far, the current one last (`else` for an `#else`).
        var conditions: [String]
        var imports: Set<String> = []

        var isPlatform: Bool { conditions.contains(where: PlatformGuardScanner.isPlatform) }
        /// A Linux branch: its condition names Linux, or it is the `#else` of branches that named Darwin.
        var isLinuxBranch: Bool {
            conditions.last == "else" ? conditions.dropLast().contains(where: PlatformGuardScanner.isDarwin)
                                      : conditions.last.map(PlatformGuardScanner.isLinux) ?? false
        }
    }

    /// Each problem as `file:line: what`.
    static func problems(in source: String, file: String) -> [String] {
        var problems: [String] = []
        var blocks: [Block] = []
        for (index, rawLine) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            func report(_ message: String) { problems.append("\(file):\(number): \(message)") }
            if line.hasPrefix("//") { continue }
            if let condition = directive("#if", in: line) {
                blocks.append(Block(line: number, conditions: [condition]))
                continue
            }
            if let condition = directive("#elseif", in: line), !blocks.isEmpty {
                blocks[blocks.count - 1].conditions.append(condition)
                continue
            }
            if directive("#else", in: line) != nil, !blocks.isEmpty {
                blocks[blocks.count - 1].conditions.append("else")
                continue
            }
            if directive("#endif", in: line) != nil, let block = blocks.popLast() {
                if !block.imports.isDisjoint(with: linuxModules) && block.imports.isDisjoint(with: darwinModules) {
                    problems.append("\(file):\(block.line): the #if block imports "
                                    + "\(block.imports.intersection(linuxModules).sorted().joined(separator: ", ")) "
                                    + "and has no Darwin branch (import Darwin or Foundation there)")
                }
                continue
            }
            let guarded = blocks.contains { $0.isPlatform }
            if let module = importedModule(line) {
                if !blocks.isEmpty { blocks[blocks.count - 1].imports.insert(module) }
                if platformModules.contains(module) && !guarded {
                    report("import \(module) outside an #if canImport(…) or #if os(…) block")
                }
                continue
            }
            let code = line.components(separatedBy: "//").first ?? line
            for module in qualifyingModules where !guarded && contains(identifier: module + ".", in: code) {
                report("\(module).… called by its module's name outside an #if canImport(…) or #if os(…) block")
            }
            let inLinuxBranch = blocks.contains { $0.isLinuxBranch }
            for name in linuxOnlyNames where !inLinuxBranch && contains(identifier: name, in: code) {
                report("\(name) exists on Linux only: use it in an #if os(Linux) branch, beside a Darwin one")
            }
            if !inLinuxBranch, let constant = rawValueOfCConstant(in: code) {
                report("\(constant).rawValue: Glibc imports \(constant) as an enum, Darwin as a number: "
                       + "use it in an #if os(Linux) branch, beside a Darwin one")
            }
        }
        return problems
    }

    /// The condition after `keyword` (`#if canImport(Glibc)` → `canImport(Glibc)`), or nil when the line is not
    /// that directive.
    private static func directive(_ keyword: String, in line: String) -> String? {
        guard line.hasPrefix(keyword) else { return nil }
        let rest = line.dropFirst(keyword.count)
        guard rest.isEmpty || rest.first == " " || rest.first == "\t" else { return nil }
        return rest.trimmingCharacters(in: .whitespaces)
    }

    fileprivate static func isPlatform(_ condition: String) -> Bool {
        condition.contains("canImport(") || condition.contains("os(")
    }

    fileprivate static func isLinux(_ condition: String) -> Bool {
        ["os(Linux)", "os(Android)", "canImport(Glibc)", "canImport(Musl)", "canImport(Android)", "canImport(Bionic)"]
            .contains { condition.contains($0) } && !condition.hasPrefix("!")
    }

    fileprivate static func isDarwin(_ condition: String) -> Bool {
        ["canImport(Darwin)", "os(macOS)", "os(iOS)", "os(tvOS)", "os(watchOS)", "os(visionOS)"]
            .contains { condition.contains($0) } && !condition.hasPrefix("!")
    }

    /// The first C constant (`SOCK_STREAM`: capitals, digits and an underscore) whose `.rawValue` `code` takes.
    private static func rawValueOfCConstant(in code: String) -> String? {
        func isConstantCharacter(_ character: Character) -> Bool {
            (character.isASCII && character.isUppercase) || character.isNumber || character == "_"
        }
        var searchStart = code.startIndex
        while let range = code.range(of: ".rawValue", range: searchStart..<code.endIndex) {
            var start = range.lowerBound
            while start > code.startIndex, isConstantCharacter(code[code.index(before: start)]) {
                start = code.index(before: start)
            }
            let name = code[start..<range.lowerBound]
            let before = start == code.startIndex ? nil : code[code.index(before: start)]
            if name.contains("_"), name.first?.isUppercase == true,
               !(before.map { $0.isLetter || $0 == "." } ?? false) {
                return String(name)
            }
            searchStart = range.upperBound
        }
        return nil
    }

    /// The module of `import X`, `@_exported import X`, `import X.Y` or `import func X.y`.
    private static func importedModule(_ line: String) -> String? {
        var words = line.split(separator: " ").map(String.init)
        while let first = words.first, first.hasPrefix("@") || ["public", "package", "internal"].contains(first) {
            words.removeFirst()
        }
        guard words.first == "import", words.count >= 2 else { return nil }
        let kinds: Set<String> = ["struct", "class", "enum", "protocol", "typealias", "func", "var", "let"]
        let path = words.count >= 3 && kinds.contains(words[1]) ? words[2] : words[1]
        return path.split(separator: ".").first.map(String.init)
    }

    /// Whether `name` occurs in `code` with no identifier character just before it (and, for a name that does not
    /// end in `.`, none just after it).
    private static func contains(identifier name: String, in code: String) -> Bool {
        func isIdentifier(_ character: Character) -> Bool {
            character.isLetter || character.isNumber || character == "_"
        }
        var searchStart = code.startIndex
        while let range = code.range(of: name, range: searchStart..<code.endIndex) {
            let before = range.lowerBound == code.startIndex ? nil : code[code.index(before: range.lowerBound)]
            let after = range.upperBound == code.endIndex ? nil : code[range.upperBound]
            if !(before.map(isIdentifier) ?? false) && (name.hasSuffix(".") || !(after.map(isIdentifier) ?? false)) {
                return true
            }
            searchStart = range.upperBound
        }
        return false
    }
}

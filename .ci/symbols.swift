// Reduces a module's symbol graphs to the module's own symbols and counts its documented public symbols.
//
//     swift .ci/symbols.swift INPUT_DIR OUTPUT_DIR MODULE...   (from the package root)
//
// Reads INPUT_DIR/MODULE.symbols.json and INPUT_DIR/MODULE@*.symbols.json (what `swift package dump-symbol-graph`
// writes), keeps the symbols declared in a file under Sources/MODULE/ (NoteKit re-exports Foundation, so its graph also
// holds Foundation's ~19,000 symbols) together with the members the compiler synthesizes for them, drops every
// relationship that names a dropped symbol, and writes the result to OUTPUT_DIR/MODULE for `docc convert`.
//
// Then prints one line of documentation coverage per module and exits 1 when NOTEKIT_DOCS_COVERAGE is `require`
// and a symbol lacks documentation. What counts (CONTRIBUTING.md, "Documentation"):
// - a symbol is one of the module's own public or open declarations, written in its sources; the members the
//   compiler synthesizes (a protocol extension's default, `!=` from `==`) are not counted: docc shows their
//   protocol's documentation;
// - it is documented when it carries a doc comment of its own (`///`);
// - a member without one that implements a requirement of another module's protocol counts as documented in the
//   second figure, since docc shows the requirement's documentation: the compiler attaches that comment (naming
//   its module), and the table below names the standard-library and Foundation requirements it may not attach
//   (`description`, `==`, `hash(into:)`, `init(from:)`, `errorDescription`, …). The line gives both figures;
//   NOTEKIT_DOCS_COVERAGE=require fails on the second.
// NOTEKIT_DOCS_COVERAGE=list prints every undocumented symbol and where it is declared, without failing.
import Foundation

let arguments = CommandLine.arguments
guard arguments.count >= 4 else {
    FileHandle.standardError.write(Data("usage: symbols.swift INPUT_DIR OUTPUT_DIR MODULE...\n".utf8))
    exit(2)
}
let input = URL(fileURLWithPath: arguments[1])
let outputRoot = URL(fileURLWithPath: arguments[2])
let mode = ProcessInfo.processInfo.environment["NOTEKIT_DOCS_COVERAGE"] ?? "report"
guard ["report", "require", "list"].contains(mode) else {
    FileHandle.standardError.write(Data(
        "docs: NOTEKIT_DOCS_COVERAGE is \(mode); expected report, require or list\n".utf8))
    exit(2)
}

/// Requirements of standard-library and Foundation protocols whose implementations need no comment of their own,
/// by the protocol's name (as the symbol graph's `conformsTo` fallback spells it) and the member's title.
let standardRequirements: [String: Set<String>] = [
    "Swift.CustomStringConvertible": ["description"],
    "Swift.CustomDebugStringConvertible": ["debugDescription"],
    "Swift.LosslessStringConvertible": ["init(_:)"],
    "Swift.Equatable": ["==(_:_:)"],
    "Swift.Hashable": ["hash(into:)", "hashValue"],
    "Swift.Comparable": ["<(_:_:)"],
    "Swift.Identifiable": ["id"],
    "Swift.Encodable": ["encode(to:)"],
    "Swift.Decodable": ["init(from:)"],
    "Swift.RawRepresentable": ["init(rawValue:)", "rawValue"],
    "Swift.CaseIterable": ["allCases"],
    "Swift.Sequence": ["makeIterator()", "underestimatedCount"],
    "Swift.IteratorProtocol": ["next()"],
    "Swift.AsyncSequence": ["makeAsyncIterator()"],
    "Swift.AsyncIteratorProtocol": ["next()", "next(isolation:)"],
    "Swift.Collection": ["startIndex", "endIndex", "index(after:)", "subscript(_:)", "count", "isEmpty"],
    "Swift.BidirectionalCollection": ["index(before:)"],
    "Swift.ExpressibleByStringLiteral": ["init(stringLiteral:)"],
    "Swift.ExpressibleByIntegerLiteral": ["init(integerLiteral:)"],
    "Swift.ExpressibleByArrayLiteral": ["init(arrayLiteral:)"],
    "Swift.ExpressibleByBooleanLiteral": ["init(booleanLiteral:)"],
    "Swift.ExpressibleByNilLiteral": ["init(nilLiteral:)"],
    "Swift.Error": [],
    "Foundation.LocalizedError": ["errorDescription", "failureReason", "recoverySuggestion", "helpAnchor"],
    "Foundation.CustomNSError": ["errorCode", "errorUserInfo", "errorDomain"],
]

func percent(_ part: Int, _ whole: Int) -> String {
    whole == 0 ? "100%" : String(format: "%.1f%%", Double(part) * 100 / Double(whole))
}

/// Writes `module`'s reduced graphs to OUTPUT_DIR/module and prints its coverage; false when coverage is required
/// and short.
func process(_ module: String) -> Bool {
    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("docs: \(module): \(message)\n".utf8))
        exit(1)
    }
    let sourcesPrefix = URL(fileURLWithPath: "Sources/\(module)").standardizedFileURL.path + "/"
    let output = outputRoot.appendingPathComponent(module)
    // The graphs of the module: its own and one per module it extends (MODULE@Swift, MODULE@Foundation, …).
    let files = (try? FileManager.default.contentsOfDirectory(atPath: input.path)) ?? []
    let graphs = files.filter {
        $0 == "\(module).symbols.json" || ($0.hasPrefix("\(module)@") && $0.hasSuffix(".symbols.json"))
    }.sorted()
    guard graphs.contains("\(module).symbols.json") else { fail("no \(module).symbols.json in \(input.path)") }
    try? FileManager.default.removeItem(at: output)
    do { try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true) } catch {
        fail("cannot create \(output.path): \(error)")
    }

    struct Counted { let title: String; let place: String; let documented: Bool; let standard: Bool }
    var counted: [Counted] = []

    for name in graphs {
        let url = input.appendingPathComponent(name)
        guard let data = try? Data(contentsOf: url),
              var graph = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
              let symbols = graph["symbols"] as? [[String: Any]] else { fail("\(url.path) is not a symbol graph") }
        let relationships = graph["relationships"] as? [[String: Any]] ?? []
        func id(_ symbol: [String: Any]) -> String {
            (symbol["identifier"] as? [String: Any])?["precise"] as? String ?? ""
        }
        func uri(_ symbol: [String: Any]) -> String? { (symbol["location"] as? [String: Any])?["uri"] as? String }
        func isOwn(_ uri: String) -> Bool {
            URL(string: uri)?.standardizedFileURL.path.hasPrefix(sourcesPrefix) ?? false
        }
        // Declared in the module's sources; a synthesized member belongs to the type named after `::SYNTHESIZED::`.
        var own = Set(symbols.filter { uri($0).map(isOwn) ?? false }.map(id))
        for symbol in symbols where uri(symbol) == nil {
            let precise = id(symbol)
            if let range = precise.range(of: "::SYNTHESIZED::"), own.contains(String(precise[range.upperBound...])) {
                own.insert(precise)
            }
        }
        let all = Set(symbols.map(id))
        let kept = symbols.filter { own.contains(id($0)) }
        let keptRelationships = relationships.filter { relationship in
            [relationship["source"], relationship["target"]].allSatisfy { name in
                guard let name = name as? String else { return false }
                return own.contains(name) || !all.contains(name)
            }
        }
        graph["symbols"] = kept
        graph["relationships"] = keptRelationships
        do {
            try JSONSerialization.data(withJSONObject: graph).write(to: output.appendingPathComponent(name))
        } catch { fail("cannot write \(name): \(error)") }

        // Coverage: the declarations written in the module's sources.
        var parent: [String: String] = [:]
        var conformances: [String: Set<String>] = [:]
        for relationship in keptRelationships {
            guard let source = relationship["source"] as? String, let target = relationship["target"] as? String,
                  let kind = relationship["kind"] as? String else { continue }
            if kind == "memberOf" { parent[source] = target }
            if kind == "conformsTo" {
                // An external protocol is named by its fallback ("Swift.Equatable"); use the fallback for any.
                let name = relationship["targetFallback"] as? String ?? target
                conformances[source, default: []].insert(name)
            }
        }
        for symbol in kept where uri(symbol) != nil {
            let access = symbol["accessLevel"] as? String ?? ""
            guard access == "public" || access == "open" else { continue }
            let precise = id(symbol)
            let title = (symbol["names"] as? [String: Any])?["title"] as? String ?? precise
            let comment = symbol["docComment"] as? [String: Any]
            let lines = (comment?["lines"] as? [[String: Any]]) ?? []
            let hasText = lines.contains {
                !(($0["text"] as? String) ?? "").trimmingCharacters(in: .whitespaces).isEmpty
            }
            // The compiler attaches the comment of the requirement a member implements, naming that module.
            let inherited = (comment?["module"] as? String).map { $0 != module } ?? false
            let documented = hasText && !inherited
            let protocols = parent[precise].flatMap { conformances[$0] } ?? []
            let standard = (hasText && inherited)
                || protocols.contains { standardRequirements[$0]?.contains(title) ?? false }
            let location = symbol["location"] as? [String: Any]
            let line = ((location?["position"] as? [String: Any])?["line"] as? Int).map { $0 + 1 } ?? 0
            let root = FileManager.default.currentDirectoryPath + "/"
            let path = (uri(symbol).flatMap { URL(string: $0)?.standardizedFileURL.path }) ?? "?"
            let file = path.hasPrefix(root) ? String(path.dropFirst(root.count)) : path
            // The full name, `FileStoreError.locked(path:holder:timeout:)`.
            let name = (symbol["pathComponents"] as? [String])?.joined(separator: ".") ?? title
            counted.append(Counted(title: name, place: "\(file):\(line)", documented: documented, standard: standard))
        }
    }

    let total = counted.count
    let own = counted.filter(\.documented).count
    let withStandard = counted.filter { $0.documented || $0.standard }.count
    print("docs: \(module): \(total) public symbols, \(own) with a doc comment (\(percent(own, total))); "
          + "\(withStandard) counting the requirements they implement (\(percent(withStandard, total)))")
    let missing = counted.filter { !$0.documented && !$0.standard }
    if mode == "list" || (mode == "require" && !missing.isEmpty) {
        for symbol in missing.sorted(by: { $0.place < $1.place }) {
            print("  undocumented: \(symbol.title) (\(symbol.place))")
        }
    }
    if mode == "require" && !missing.isEmpty {
        FileHandle.standardError.write(Data(
            "docs: \(module): \(missing.count) public symbols lack documentation (NOTEKIT_DOCS_COVERAGE=require)\n"
                .utf8))
        return false
    }
    return true
}

var complete = true
for module in arguments.dropFirst(3) where !process(module) { complete = false }
exit(complete ? 0 : 1)

// The public API of a library module, one line per symbol, from the compiler's symbol graph: what `.ci/api`
// writes to api/<Module>.txt and compares. Run by `.ci/api`; by hand:
//
//     swift .ci/api-listing.swift <symbol-graph-dir> <sources-dir> <Module> > api/<Module>.txt
//
// A line is `kind | path | declaration`, the declaration's fragments joined, then `[where …]` for a member of a
// constrained extension and `[protocol extension]` for a member of a protocol's extension (a default implementation
// reads like the requirement it implements). Conformances are lines too (`conformance | Type | : Protocol`): one that
// is dropped breaks dependents as surely as a method. Only the module's own symbols count: those declared under
// <sources-dir>/<Module>/ (NoteKit re-exports Foundation, whose symbols are not NoteKit's API), in the module's graph
// and in the graphs of its extensions to other modules' types (`NoteKit@Swift.symbols.json`). Members a type gets
// from another module's default implementations (`!=`, `localizedDescription`) are the compiler's, not the module's:
// `.ci/api` asks for graphs without them. Lines are sorted, so the listing is the same on every run.
import Foundation

struct Graph: Decodable {
    struct Symbol: Decodable {
        struct Kind: Decodable { let identifier: String }
        struct Identifier: Decodable { let precise: String }
        struct Fragment: Decodable { let spelling: String }
        struct Location: Decodable { let uri: String }
        struct Constraint: Decodable {
            let kind: String
            let lhs: String
            let rhs: String
        }
        struct Extension: Decodable {
            let extendedModule: String
            let typeKind: String?
            let constraints: [Constraint]?
        }
        let kind: Kind
        let identifier: Identifier
        let pathComponents: [String]
        let declarationFragments: [Fragment]?
        let location: Location?
        let swiftExtension: Extension?
    }
    struct Relationship: Decodable {
        let kind: String
        let source: String
        let target: String
        let targetFallback: String?
        let swiftConstraints: [Symbol.Constraint]?
    }
    let symbols: [Symbol]
    let relationships: [Relationship]
}

/// `T: P, U == V`, as a where clause lists constraints.
func clause(_ constraints: [Graph.Symbol.Constraint]?) -> String {
    guard let constraints, !constraints.isEmpty else { return "" }
    return " [where " + constraints.map { "\($0.lhs)\($0.kind == "sameType" ? " == " : ": ")\($0.rhs)" }
        .joined(separator: ", ") + "]"
}

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: api-listing.swift <symbol-graph-dir> <sources-dir> <Module>\n".utf8))
    exit(2)
}
let (graphDirectory, sourcesDirectory, module) = (arguments[arguments.startIndex],
                                                  arguments[arguments.startIndex + 1],
                                                  arguments[arguments.startIndex + 2])
let ownSources = "/" + URL(fileURLWithPath: sourcesDirectory).standardizedFileURL.lastPathComponent + "/\(module)/"

let files = try FileManager.default.contentsOfDirectory(atPath: graphDirectory)
    .filter { $0 == "\(module).symbols.json" || ($0.hasPrefix("\(module)@") && $0.hasSuffix(".symbols.json")) }
guard files.contains("\(module).symbols.json") else {
    FileHandle.standardError.write(Data("api-listing: no symbol graph of \(module) in \(graphDirectory)\n".utf8))
    exit(1)
}

// Compiler-implied conformances every type has, which no declaration states.
let implied: Set<String> = ["Swift.Copyable", "Swift.Escapable", "Swift.SendableMetatype"]
let graphs = try files.map { file in
    try JSONDecoder().decode(Graph.self, from: Data(contentsOf: URL(fileURLWithPath: graphDirectory + "/" + file)))
}
// Symbols stay a list, so that two overloads that read the same both count; a conformance shows in each graph
// that names it, and counts once.
var lines: [String] = []
var conformances: Set<String> = []
var names: [String: String] = [:]
var own: Set<String> = []
for graph in graphs {
    for symbol in graph.symbols {
        let extended = symbol.swiftExtension.flatMap { $0.extendedModule == module ? nil : $0.extendedModule }
        let path = (extended.map { $0 + "." } ?? "") + symbol.pathComponents.joined(separator: ".")
        names[symbol.identifier.precise] = path
        guard let uri = symbol.location?.uri, uri.contains(ownSources) else { continue }
        own.insert(symbol.identifier.precise)
        let kind = symbol.kind.identifier.replacingOccurrences(of: "swift.", with: "")
        let declaration = (symbol.declarationFragments ?? []).map(\.spelling).joined()
        // A protocol's extension member (a default implementation) reads like the requirement it implements.
        let inExtension = symbol.swiftExtension?.typeKind == "swift.protocol" ? " [protocol extension]" : ""
        lines.append("\(kind) | \(path) | \(declaration)\(clause(symbol.swiftExtension?.constraints))\(inExtension)")
    }
    // A relationship names a type of another module only by its identifier; its members' `memberOf` gives the name.
    for relationship in graph.relationships where relationship.kind == "memberOf" {
        if names[relationship.target] == nil, let fallback = relationship.targetFallback {
            names[relationship.target] = fallback
        }
    }
}
for graph in graphs {
    for relationship in graph.relationships where relationship.kind == "conformsTo" {
        let target = names[relationship.target] ?? relationship.targetFallback ?? relationship.target
        guard !implied.contains(target), own.contains(relationship.source) || own.contains(relationship.target),
              let source = names[relationship.source] else { continue }
        conformances.insert("conformance | \(source) | : \(target)\(clause(relationship.swiftConstraints))")
    }
}
print((lines + conformances).sorted().joined(separator: "\n"))

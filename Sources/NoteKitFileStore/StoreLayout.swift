/// Where the files of a store live (docs/FORMAT.md, *Directory layout*).
struct StoreLayout: Sendable {
    let root: String

    var manifest: String { root + "/MANIFEST" }
    var temporaryManifest: String { root + "/MANIFEST.tmp" }
    var lock: String { root + "/LOCK" }
    var segments: String { root + "/segments" }
    var blobs: String { root + "/blobs" }
    var quarantine: String { root + "/quarantine" }
    /// The directory holding the store's directory, whose entry for it a new store flushes.
    var parent: String {
        let path = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The path of segment `number`.
    func segment(_ number: Int) -> String { segments + "/" + Self.segmentName(number) }

    /// `000042.seg`.
    static func segmentName(_ number: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".seg"
    }

    /// The segment number a file name denotes, if it is a segment's name.
    static func segmentNumber(_ name: String) -> Int? {
        guard name.hasSuffix(".seg"), let number = Int(name.dropLast(4)), number > 0 else { return nil }
        return name == segmentName(number) ? number : nil
    }
}

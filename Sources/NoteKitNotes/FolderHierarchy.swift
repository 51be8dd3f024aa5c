// SortDescriptor lives in Foundation proper on Linux.
import Foundation
import NoteKit

/// A move the folder hierarchy refuses; nothing was changed.
public enum FolderHierarchyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A folder cannot be inside itself.
    case moveIntoItself(folder: String)
    /// A folder cannot be moved into a folder inside it.
    case moveIntoDescendant(folder: String, destination: String)

    /// A sentence naming the folder (and the destination) by name.
    public var description: String {
        switch self {
        case .moveIntoItself(let folder): "cannot move folder \(String(reflecting: folder)) into itself"
        case let .moveIntoDescendant(folder, destination):
            "cannot move folder \(String(reflecting: folder)) into \(String(reflecting: destination)), which is "
                + "inside it"
        }
    }
}

/// The folder tree's rules: every move and folder delete goes through here (R4, R5), and every traversal
/// terminates even on cyclic data (R7).
///
/// The store does not enforce a tree: a graph with a cycle, built directly through `Folder.parent`, is accepted,
/// saved and reopened (R6). This type keeps moves from creating one, and reads any graph safely.
///
/// Changes are made in the context; save it when you are done.
public struct FolderHierarchy {
    /// The context the folders belong to.
    public let context: ModelContext

    /// The hierarchy of the folders in `context`. It holds no state of its own: make one wherever needed.
    public init(context: ModelContext) {
        self.context = context
    }

    // MARK: Changing the tree

    /// Moves `folder` into `destination` (nil makes it a root folder).
    ///
    /// Moving a folder is organization: the notes inside keep their timestamps and history (T3).
    ///
    /// - Throws: ``FolderHierarchyError`` when `destination` is `folder` or inside it (R5); nothing changes.
    /// - Complexity: O(folders inside `folder`).
    public func move(_ folder: Folder, to destination: Folder?) throws(FolderHierarchyError) {
        if let destination {
            if destination === folder { throw .moveIntoItself(folder: folder.name) }
            if descendants(of: folder).contains(where: { $0 === destination }) {
                throw .moveIntoDescendant(folder: folder.name, destination: destination.name)
            }
        }
        guard folder.parent !== destination else { return }
        folder.parent = destination
    }

    /// Deletes `folder`, keeping everything it held (R4): its direct children move into its own parent (so they
    /// keep their place in the tree), its direct notes become unfiled, then the folder is deleted. Folders and
    /// notes deeper down are untouched.
    ///
    /// On cyclic data, where the folder's parent is also inside it, the children become root folders instead.
    ///
    /// - Throws: what `ModelContext.delete(_:)` throws.
    public func delete(_ folder: Folder) throws {
        var destination = folder.parent
        if let parent = destination, parent === folder || descendants(of: folder).contains(where: { $0 === parent }) {
            destination = nil
        }
        for child in folder.children where child !== folder { child.parent = destination }
        for note in folder.notes { note.folder = nil }
        try context.delete(folder)
    }

    // MARK: Reading the tree

    /// The folders above `folder`, nearest first. Stops at a root, or where the chain loops back (R7).
    public func ancestors(of folder: Folder) -> [Folder] {
        var result: [Folder] = []
        var visited: Set<ObjectIdentifier> = [ObjectIdentifier(folder)]
        var next = folder.parent
        while let current = next, visited.insert(ObjectIdentifier(current)).inserted {
            result.append(current)
            next = current.parent
        }
        return result
    }

    /// Every folder inside `folder`, depth first, each child before its own children, children in their stored
    /// order. Each folder appears once, even on cyclic data (R7); `folder` itself is not included.
    public func descendants(of folder: Folder) -> [Folder] {
        var result: [Folder] = []
        var visited: Set<ObjectIdentifier> = [ObjectIdentifier(folder)]
        var stack = Array(folder.children.reversed())
        while let current = stack.popLast() {
            guard visited.insert(ObjectIdentifier(current)).inserted else { continue }
            result.append(current)
            stack.append(contentsOf: current.children.reversed())
        }
        return result
    }

    /// The folders from the top of `folder`'s chain down to `folder` itself.
    public func path(of folder: Folder) -> [Folder] {
        ancestors(of: folder).reversed() + [folder]
    }

    /// How many folders are above `folder`: 0 for a root folder.
    public func depth(of folder: Folder) -> Int {
        ancestors(of: folder).count
    }

    /// The root folders, by name.
    ///
    /// - Throws: what `ModelContext.fetch(_:)` throws.
    public func roots() throws -> [Folder] {
        try context.fetch(FetchDescriptor<Folder>(predicate: #Predicate { $0.parent == nil },
                                                  sortBy: [SortDescriptor(\.name)]))
    }

    /// The folders whose chain of parents never reaches a root: they sit on a cycle or below one. Empty when the
    /// folders form a forest.
    ///
    /// - Throws: what `ModelContext.fetch(_:)` throws.
    /// - Complexity: O(folders).
    public func foldersOffTheTree() throws -> [Folder] {
        let folders = try context.fetch(FetchDescriptor<Folder>(sortBy: [SortDescriptor(\.name)]))
        var reachesRoot: [ObjectIdentifier: Bool] = [:]
        for folder in folders {
            var chain: [Folder] = []
            var onChain = Set<ObjectIdentifier>()
            var current: Folder? = folder
            var verdict = true
            while let step = current {
                if let known = reachesRoot[ObjectIdentifier(step)] { verdict = known; break }
                if !onChain.insert(ObjectIdentifier(step)).inserted { verdict = false; break }
                chain.append(step)
                current = step.parent
            }
            for step in chain { reachesRoot[ObjectIdentifier(step)] = verdict }
        }
        return folders.filter { reachesRoot[ObjectIdentifier($0)] == false }
    }

    /// Whether the folders form a forest: every folder's chain of parents ends at a root.
    ///
    /// - Throws: what `ModelContext.fetch(_:)` throws.
    public func isForest() throws -> Bool {
        try foldersOffTheTree().isEmpty
    }
}

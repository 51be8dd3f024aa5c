// What `import NoteKit` brings into scope besides NoteKit itself.
//
// SwiftData re-exports Foundation, so a SwiftData file imports SwiftData alone and still writes `#Predicate`,
// `SortDescriptor`, `Date` and `UUID`. NoteKit does the same, so such a file ports by changing that one import:
// without it, the first error a porter sees is "no macro named 'Predicate'". (`FoundationEssentials` alone would
// not do: `SortDescriptor` is in Foundation's internationalization layer on Linux. NoteKit links Foundation
// already, for `SortDescriptor` and text search.)
@_exported import Foundation

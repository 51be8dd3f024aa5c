/// A live query's results grouped into sections by a key path's value (SwiftData's `SectionedResults`): a
/// random-access collection of ``ResultsSection``s, in the order their titles first appear in the sorted results.
///
/// ```swift
/// let notes = LiveQuery(FetchDescriptor<Note>(sortBy: [SortDescriptor(\.createdAt, order: .reverse)]),
///                       sectionBy: \.folderName, in: container.mainContext)
/// for section in notes.sections {
///     print(section.title, section.count)          // "Groceries" 12, "Work" 40, …
///     for note in section { print("  ", note.title) }
/// }
/// let work = notes.sections[sectionTitle: "Work"]  // O(1)
/// ```
///
/// A value of the results at one moment: it does not change when the live query fetches again (read
/// ``LiveQuery/sections`` again for the new sections).
///
/// ## Topics
/// - ``subscript(sectionTitle:)``
/// - ``titles``
public struct SectionedResults<Element: PersistentModel, SectionTitle: Hashable>: RandomAccessCollection {
    /// The results, grouped: each section's elements are contiguous, in section order.
    private let elements: [Element]
    /// Each section's title and the range of `elements` it holds.
    private let bounds: [(title: SectionTitle, range: Range<Int>)]
    /// Where each title's section is in `bounds`.
    private let positions: [SectionTitle: Int]

    /// No sections: what a live query made without `sectionBy` reports.
    package init() {
        elements = []
        bounds = []
        positions = [:]
    }

    /// `results` grouped by `title`: sections in the order their titles first appear, each holding its elements
    /// in the order of `results`.
    ///
    /// - Complexity: O(*n*) for *n* results, one `title` call each.
    init(_ results: [Element], title: (Element) -> SectionTitle) {
        var order: [SectionTitle] = []
        var members: [SectionTitle: [Element]] = [:]
        var contiguous = true
        var last: SectionTitle?
        var titles: [SectionTitle] = []
        titles.reserveCapacity(results.count)
        for element in results {
            let key = title(element)
            titles.append(key)
            if key != last, members[key] != nil { contiguous = false }
            if members[key] == nil { order.append(key) }
            members[key, default: []].append(element)
            last = key
        }
        var grouped: [Element] = []
        var bounds: [(title: SectionTitle, range: Range<Int>)] = []
        var positions: [SectionTitle: Int] = [:]
        if contiguous {
            grouped = results
            var start = 0
            for key in order {
                let count = members[key]?.count ?? 0
                positions[key] = bounds.count
                bounds.append((key, start ..< start + count))
                start += count
            }
        } else {
            grouped.reserveCapacity(results.count)
            for key in order {
                let section = members[key] ?? []
                positions[key] = bounds.count
                bounds.append((key, grouped.count ..< grouped.count + section.count))
                grouped += section
            }
        }
        self.elements = grouped
        self.bounds = bounds
        self.positions = positions
    }

    /// The position of the first section.
    public var startIndex: Int { 0 }
    /// One past the position of the last section.
    public var endIndex: Int { bounds.count }

    /// The section at `position`.
    ///
    /// - Precondition: `position` is a valid index (as for an array).
    public subscript(position: Int) -> ResultsSection<Element, SectionTitle> {
        let (title, range) = bounds[position]
        return ResultsSection(title: title, elements: elements[range])
    }

    /// The section titled `title`, or nil when no result has that title.
    ///
    /// - Complexity: O(1).
    public subscript(sectionTitle title: SectionTitle) -> ResultsSection<Element, SectionTitle>? {
        positions[title].map { self[$0] }
    }

    /// Every section's title, in section order.
    public var titles: [SectionTitle] { bounds.map(\.title) }
}

/// One section of a ``SectionedResults``: the results whose section key path has the value ``title``, in the
/// results' order (SwiftData's `ResultsSection`). A random-access collection of models, indexed from 0.
public struct ResultsSection<Element: PersistentModel, SectionTitle: Hashable>: RandomAccessCollection, Identifiable {
    /// The value of the section key path the elements share.
    public let title: SectionTitle
    private let elements: ArraySlice<Element>

    init(title: SectionTitle, elements: ArraySlice<Element>) {
        self.title = title
        self.elements = elements
    }

    /// The section's identity: its ``title``.
    public var id: SectionTitle { title }
    /// The position of the first element: 0.
    public var startIndex: Int { 0 }
    /// The number of elements.
    public var endIndex: Int { elements.count }

    /// The element at `position`, counted from the section's start.
    ///
    /// - Precondition: `position` is a valid index (as for an array).
    public subscript(position: Int) -> Element { elements[elements.startIndex + position] }
}

/// Undo and redo for one ``ModelContext``: NoteKit's counterpart of the `UndoManager` that SwiftData and Core
/// Data attach to a context.
///
/// ```swift
/// let context = ModelContext(container)
/// context.undoManager = ModelUndoManager()
/// let note = Note()
/// note.title = "Draft"
/// context.insert(note)
/// context.processPendingChanges()   // closes the group: "insert the note"
/// note.title = "Final"
/// context.undoManager?.undo()       // the title is "Draft" again
/// context.undoManager?.undo()       // the note is no longer in the context
/// context.undoManager?.redo()       // it is back, titled "Draft"
/// ```
///
/// NoteKit has its own undo manager because Linux has no run loop to close undo groups at the end of an event,
/// and Foundation's `UndoManager` is not dependable there.
///
/// ## Groups
/// Every change the context makes (inserts, property and relationship writes, deletes with their delete rules,
/// inverse maintenance) joins the open *undo group*; ``undo()`` reverts one group, ``redo()`` reapplies it.
/// Without ``beginUndoGrouping()``, changes collect in an implicit group that ``ModelContext/save()``,
/// ``ModelContext/processPendingChanges()`` and ``undo()`` close. ``beginUndoGrouping()`` and
/// ``endUndoGrouping()`` nest; the outermost end closes the group, and save and `processPendingChanges()` leave
/// an explicit group open. A group that changed nothing in the end (a value set and set back) is not recorded.
/// Recording a change clears the redo stack.
///
/// ## What undo restores
/// A group remembers, for each object it touched, the object's state before the group first touched it and its
/// state when the group closed: whether the object was in the context (inserted or saved, not deleted), its
/// attribute values and its relationship targets. Undo puts back what the group changed, and only that: values
/// the group did not change, and objects it did not touch, keep what they have now. Both sides of a
/// relationship are touched by the same group, so inverses stay consistent; a delete's cascades and
/// nullifications come back as one.
///
/// Undo and redo work the same before and after a save: an object's flags come from what is saved now, not from
/// when the change was recorded. Undoing an insert that was saved deletes the object at the next save; undoing
/// a delete that was saved inserts the object again, with the same identifier and values; restored values that
/// equal the saved ones leave the object unchanged (``ModelContext/hasChanges`` is false again once every
/// unsaved edit is undone). Undoing an insert that was never saved leaves the object outside any context, with
/// its relationships to the objects that left with it, as ``ModelContext/rollback()`` does.
///
/// Observers see undo and redo like any other change (`withObservationTracking` fires).
///
/// ## Limits
/// - ``ModelContext/rollback()`` removes every action, as Core Data's does.
/// - A save whose uniqueness policy turns an insert into an update of an existing object (an upsert) removes
///   every action: a group cannot undo an object that took another's identity or was merged into it.
/// - Undo does not reach into other contexts: values another context saved and this one read since are
///   overwritten only where the undone group changed them.
///
/// A manager belongs to its context's isolation domain and is not `Sendable`.
///
/// ## Topics
/// - ``undo()``
/// - ``redo()``
/// - ``canUndo``
/// - ``canRedo``
/// - ``beginUndoGrouping()``
/// - ``endUndoGrouping()``
/// - ``groupingLevel``
/// - ``levelsOfUndo``
/// - ``removeAllActions()``
/// - ``setActionName(_:)``
/// - ``undoActionName``
/// - ``redoActionName``
/// - ``isUndoRegistrationEnabled``
/// - ``disableUndoRegistration()``
/// - ``enableUndoRegistration()``
public final class ModelUndoManager {
    /// The context this manager records, set when it is first assigned to one.
    weak var context: ModelContext?
    /// Closed groups, oldest first; ``undo()`` takes the last.
    var undoStack: [UndoGroup] = []
    /// Undone groups, most recently undone last; ``redo()`` takes the last.
    var redoStack: [UndoGroup] = []
    /// The changes of the open group, in the order objects were first touched.
    var openChanges: [UndoGroup.Change] = []
    /// Objects whose latest change in `openChanges` is still being recorded (its after-state not taken yet).
    var recording: Set<ObjectIdentifier> = []
    var openName = ""
    var registrationDisabled = 0
    /// True while a group is being undone or redone: what that changes is not recorded.
    var isRestoring = false

    /// A manager with no actions, recording once it is assigned to ``ModelContext/undoManager``.
    public init() {}

    // MARK: Limits

    /// The most groups ``undo()`` can go back; 0 (the default) means no limit. The oldest groups are dropped
    /// when a group closes beyond the limit, and at once when the limit is lowered.
    public var levelsOfUndo = 0 {
        didSet {
            precondition(levelsOfUndo >= 0, "levelsOfUndo must be 0 (no limit) or more")
            trimUndoStack()
        }
    }

    /// Removes every undo and redo action, and the changes of the open group. The grouping level and whether
    /// registration is enabled stay as they are.
    public func removeAllActions() {
        undoStack.removeAll()
        redoStack.removeAll()
        openChanges.removeAll()
        recording.removeAll()
        openName = ""
    }

    // MARK: Grouping

    /// How many ``beginUndoGrouping()`` calls are waiting for their ``endUndoGrouping()``.
    public private(set) var groupingLevel = 0

    /// Opens an explicit undo group, or a nested one inside the open explicit group.
    ///
    /// Changes made since the last group closed and before the outermost `beginUndoGrouping()` form their own
    /// group: an explicit group holds exactly what was changed between its begin and its end.
    public func beginUndoGrouping() {
        if groupingLevel == 0 { closeGroup() }
        groupingLevel += 1
    }

    /// Ends the innermost explicit group; the outermost end closes the group and makes it what ``undo()``
    /// reverts next.
    ///
    /// - Precondition: a ``beginUndoGrouping()`` is waiting for this end.
    public func endUndoGrouping() {
        precondition(groupingLevel > 0, "endUndoGrouping() without a matching beginUndoGrouping()")
        groupingLevel -= 1
        if groupingLevel == 0 { closeGroup() }
    }

    /// Closes the implicit group (outside explicit groups). What ``ModelContext/processPendingChanges()`` does.
    func closeImplicitGroup() {
        if groupingLevel == 0 { closeGroup() }
    }

    // MARK: Registration

    /// Whether changes are recorded: false between ``disableUndoRegistration()`` and the matching
    /// ``enableUndoRegistration()``.
    public var isUndoRegistrationEnabled: Bool { registrationDisabled == 0 }

    /// Stops recording changes until the matching ``enableUndoRegistration()`` (calls nest).
    ///
    /// Changes made meanwhile belong to no group: undo and redo leave them in place, also on objects the open
    /// group touches before or after, unless a group changed the same property (undo then puts back the
    /// group's value). The open group stays open.
    public func disableUndoRegistration() {
        if registrationDisabled == 0 { freezeOpenChanges() }
        registrationDisabled += 1
    }

    /// Resumes recording after ``disableUndoRegistration()``.
    ///
    /// - Precondition: registration was disabled.
    public func enableUndoRegistration() {
        precondition(registrationDisabled > 0, "enableUndoRegistration() without a matching disableUndoRegistration()")
        registrationDisabled -= 1
    }

    // MARK: Names

    /// Names the open group (an implicit one, or the explicit one being recorded), for an Undo menu item.
    /// A name given before the group's first change stays with it; an empty group's name is dropped.
    public func setActionName(_ name: String) {
        openName = name
    }

    /// The name of the group ``undo()`` would revert; empty when it has none or there is nothing to undo.
    ///
    /// - Complexity: O(objects the open group touched) when no closed group waits to be undone.
    public var undoActionName: String {
        openGroupHasChanges ? openName : undoStack.last?.name ?? ""
    }

    /// The name of the group ``redo()`` would reapply; empty when it has none or there is nothing to redo.
    public var redoActionName: String {
        redoStack.last?.name ?? ""
    }

    // MARK: Undo and redo

    /// Whether ``undo()`` would change anything: a closed group waits, or the open group changed something.
    ///
    /// - Complexity: O(objects the open group touched) when no closed group waits.
    public var canUndo: Bool {
        !undoStack.isEmpty || openGroupHasChanges
    }

    /// Whether ``redo()`` would change anything: a group was undone and nothing was recorded since.
    public var canRedo: Bool {
        !redoStack.isEmpty
    }

    /// Closes the open group, then reverts the most recent group and makes it what ``redo()`` reapplies.
    /// Does nothing when there is nothing to undo.
    ///
    /// The objects the group touched get back the existence, values and relationships they had before it, as
    /// described in ``ModelUndoManager``; nothing is saved.
    ///
    /// - Precondition: at most one explicit group is open (it is closed first, as Foundation's `UndoManager`
    ///   does), and no undo or redo is in progress.
    /// - Complexity: O(objects the group touched × their properties).
    public func undo() {
        precondition(!isRestoring, "undo() called while an undo or redo is in progress")
        precondition(groupingLevel <= 1, "undo() called inside a nested undo group")
        groupingLevel = 0
        closeGroup()
        guard let context, let group = undoStack.popLast() else { return }
        restore(group, undoing: true, in: context)
        redoStack.append(group)
    }

    /// Reapplies the most recently undone group and makes it what ``undo()`` reverts next. Does nothing when
    /// there is nothing to redo (any change recorded since the undo clears the redo stack).
    ///
    /// - Precondition: at most one explicit group is open (it is closed first), and no undo or redo is in
    ///   progress.
    /// - Complexity: O(objects the group touched × their properties).
    public func redo() {
        precondition(!isRestoring, "redo() called while an undo or redo is in progress")
        precondition(groupingLevel <= 1, "redo() called inside a nested undo group")
        groupingLevel = 0
        closeGroup()
        guard let context, let group = redoStack.popLast() else { return }
        restore(group, undoing: false, in: context)
        undoStack.append(group)
        trimUndoStack()
    }

    private func restore(_ group: UndoGroup, undoing: Bool, in context: ModelContext) {
        isRestoring = true
        defer { isRestoring = false }
        context._restore(group, undoing: undoing)
    }

    // MARK: Recording

    /// Called before `object` changes: the first change to it in the open group remembers its state before.
    func _record(_ object: ModelObject) {
        guard registrationDisabled == 0, !isRestoring, let context,
              recording.insert(ObjectIdentifier(object)).inserted else { return }
        redoStack.removeAll()
        openChanges.append(UndoGroup.Change(object: object, before: context._undoImage(of: object)))
    }

    /// Takes the after-state of every object being recorded: later changes to them start new changes (or, while
    /// registration is disabled, are not recorded at all).
    func freezeOpenChanges() {
        guard let context, !recording.isEmpty else { return }
        for index in openChanges.indices where openChanges[index].after == nil {
            openChanges[index].after = context._undoImage(of: openChanges[index].object)
        }
        recording.removeAll()
    }

    /// Ends the open group: it joins the undo stack if it changed anything.
    private func closeGroup() {
        freezeOpenChanges()
        // Without an after-state (the context is gone) a change cannot be undone or redone.
        let changes = openChanges.filter { $0.after != nil && $0.before != $0.after }
        let name = openName
        openChanges.removeAll()
        openName = ""
        guard !changes.isEmpty else { return }
        undoStack.append(UndoGroup(name: name, changes: changes))
        trimUndoStack()
    }

    private var openGroupHasChanges: Bool {
        guard let context else { return false }
        return openChanges.contains { $0.before != ($0.after ?? context._undoImage(of: $0.object)) }
    }

    private func trimUndoStack() {
        if levelsOfUndo > 0 && undoStack.count > levelsOfUndo {
            undoStack.removeFirst(undoStack.count - levelsOfUndo)
        }
    }
}

/// The changes one undo or redo applies.
struct UndoGroup {
    /// One object's state before and after a stretch of the group (usually all of it; registration disabled in
    /// the middle splits it in two).
    struct Change {
        let object: ModelObject
        let before: Image
        var after: Image?
    }

    /// What undo restores of an object: whether it is in the context, and its values.
    struct Image: Equatable {
        /// Inserted or saved, not deleted, in the context.
        let isInContext: Bool
        /// Deleted (only used to tell a deleted object outside the context from one never inserted).
        let isDeleted: Bool
        let attributes: AttributeValues
        let relationships: RelationshipValues
    }

    let name: String
    let changes: [Change]
}

import NoteKit

// The append-only JSON segment store arrives with its own issue; this target exists so the package layout is final.

// The names the transaction number and the row had before issue 36 (item 5) gave each one name. Each forwards to
// the new name, so that code written against them still builds, with a warning that names the replacement.

extension FileStore.Statistics {
    /// The number of the last committed transaction: ``lastTransactionNumber``.
    @available(*, deprecated, renamed: "lastTransactionNumber")
    public var lastTransaction: UInt64 {
        get { lastTransactionNumber }
        set { lastTransactionNumber = newValue }
    }
}

extension FileStore.BackupReport {
    /// The last transaction of the state copied: ``lastTransactionNumber``.
    @available(*, deprecated, renamed: "lastTransactionNumber")
    public var lastTransaction: UInt64 {
        get { lastTransactionNumber }
        set { lastTransactionNumber = newValue }
    }
}

extension StoreInspector.Statistics {
    /// The number of the first transaction still in the log: ``firstTransactionNumber``.
    @available(*, deprecated, renamed: "firstTransactionNumber")
    public var firstTransaction: UInt64? {
        get { firstTransactionNumber }
        set { firstTransactionNumber = newValue }
    }

    /// The number of the last committed transaction: ``lastTransactionNumber``.
    @available(*, deprecated, renamed: "lastTransactionNumber")
    public var lastTransaction: UInt64 {
        get { lastTransactionNumber }
        set { lastTransactionNumber = newValue }
    }
}

extension FileStore.Statistics {
    /// Rows (live objects) per entity: ``rowsPerEntity``. (Its name before issue 36, item 5.)
    @available(*, deprecated, renamed: "rowsPerEntity")
    public var objectsPerEntity: [String: Int] {
        get { rowsPerEntity }
        set { rowsPerEntity = newValue }
    }
}

import CLibPQ
import Foundation

/// One connection to a PostgreSQL server through libpq: statements with parameters only, results in text form,
/// every failure a ``MirrorError`` that names the server (never its password) and the statement's purpose.
///
/// Not thread-safe (a libpq connection is not): one owner at a time. The connection closes when the object goes.
package final class PostgresConnection {
    private let connection: OpaquePointer
    /// Where the connection goes, for messages: host, port, database and user, never the password.
    let server: String

    /// Connects with a libpq connection string (`host=… dbname=…`) or URI (`postgresql://…`); TLS and every other
    /// libpq option pass through as written.
    ///
    /// - Throws: ``MirrorError/invalidConnectionString(_:)`` when libpq cannot parse it,
    ///   ``MirrorError/connectionFailed(server:message:)`` when the server cannot be reached or refuses.
    package init(_ connectionString: String) throws(MirrorError) {
        server = try Self.describe(connectionString)
        guard let connection = PQconnectdb(connectionString) else {
            throw .connectionFailed(server: server, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.message(PQerrorMessage(connection))
            PQfinish(connection)
            throw .connectionFailed(server: server, message: message)
        }
        self.connection = connection
        // Notices (`relation already exists, skipping`) would go to standard error by default.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
    }

    deinit { PQfinish(connection) }

    /// The rows of a statement's result, as text (nil for SQL NULL), in the order the server sent them.
    package struct Rows {
        package var values: [[String?]]
        /// The number of rows a command changed (`INSERT`, `UPDATE`, `DELETE`), 0 for others.
        package var affected: Int
    }

    /// Runs one statement with `parameters` bound as text (`$1`, `$2`, …; nil binds NULL): no value is ever spliced
    /// into the SQL.
    ///
    /// - Parameter purpose: what the statement is for, named in an error.
    /// - Throws: ``MirrorError/serverError(server:purpose:sqlState:message:)`` when the server rejects it,
    ///   ``MirrorError/connectionFailed(server:message:)`` when the connection is gone.
    @discardableResult
    package func execute(_ sql: String, _ parameters: [String?] = [], purpose: String) throws(MirrorError) -> Rows {
        let result = withParameters(parameters) { values in
            PQexecParams(connection, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
        guard let result else {
            throw .connectionFailed(server: server, message: Self.message(PQerrorMessage(connection)))
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            let columnCount = Int(PQnfields(result)), rowCount = Int(PQntuples(result))
            var values: [[String?]] = []
            values.reserveCapacity(rowCount)
            for row in 0..<Int32(rowCount) {
                values.append((0..<Int32(columnCount)).map { column in
                    PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
                })
            }
            return Rows(values: values, affected: Int(Self.message(PQcmdTuples(result))) ?? 0)
        default:
            if PQstatus(connection) != CONNECTION_OK {
                throw .connectionFailed(server: server, message: Self.message(PQerrorMessage(connection)))
            }
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            let message = Self.message(PQresultErrorMessage(result))
            throw .serverError(server: server, purpose: purpose, sqlState: state, message: message)
        }
    }

    /// Runs `COPY … FROM STDIN` (`sql`, text format) and sends `lines`, each one row in COPY's text form: the floor
    /// the benchmark compares an initial push with.
    ///
    /// - Returns: the number of rows the server copied.
    /// - Throws: ``MirrorError/serverError(server:purpose:sqlState:message:)`` when the server rejects the statement
    ///   or the data, ``MirrorError/connectionFailed(server:message:)`` when the connection is gone.
    package func copy(_ sql: String, lines: some Sequence<String>, purpose: String) throws(MirrorError) -> Int {
        guard let start = PQexec(connection, sql) else {
            throw .connectionFailed(server: server, message: Self.message(PQerrorMessage(connection)))
        }
        let started = PQresultStatus(start) == PGRES_COPY_IN
        let startError = Self.message(PQresultErrorMessage(start))
        PQclear(start)
        guard started else { throw .serverError(server: server, purpose: purpose, sqlState: "", message: startError) }
        var chunk = [UInt8]()
        chunk.reserveCapacity(1 << 20)
        func send() throws(MirrorError) {
            let sent = chunk.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
            }
            guard sent == 1 else {
                throw .connectionFailed(server: server, message: Self.message(PQerrorMessage(connection)))
            }
            chunk.removeAll(keepingCapacity: true)
        }
        for line in lines {
            chunk.append(contentsOf: line.utf8)
            chunk.append(UInt8(ascii: "\n"))
            if chunk.count >= 1 << 20 { try send() }
        }
        if !chunk.isEmpty { try send() }
        guard PQputCopyEnd(connection, nil) == 1 else {
            throw .connectionFailed(server: server, message: Self.message(PQerrorMessage(connection)))
        }
        var copied = 0
        while let result = PQgetResult(connection) {
            defer { PQclear(result) }
            guard PQresultStatus(result) == PGRES_COMMAND_OK else {
                let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
                throw .serverError(server: server, purpose: purpose, sqlState: state,
                                   message: Self.message(PQresultErrorMessage(result)))
            }
            copied += Int(Self.message(PQcmdTuples(result))) ?? 0
        }
        return copied
    }

    /// Runs `body` inside one transaction: committed when it returns, rolled back when it throws.
    func transaction<T>(purpose: String, _ body: () throws(MirrorError) -> T) throws(MirrorError) -> T {
        try execute("BEGIN", purpose: purpose)
        do {
            let value = try body()
            try execute("COMMIT", purpose: purpose)
            return value
        } catch {
            // A failed rollback means the connection is gone; the server drops the transaction with it.
            _ = try? execute("ROLLBACK", purpose: purpose)
            throw error
        }
    }

    private func withParameters<R>(_ parameters: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        let pointers: [UnsafeMutablePointer<CChar>?] = parameters.map { $0.map { strdup($0) } ?? nil }
        defer { for pointer in pointers { free(pointer) } }
        return body(pointers.map { $0.map { UnsafePointer($0) } })
    }

    /// A message of libpq's (or a command tag), without the newline libpq ends it with. Values are read as they
    /// are, never through this.
    private static func message(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: pointer).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Host, port, database and user of a connection string, for messages; the password and every other option
    /// are left out.
    static func describe(_ connectionString: String) throws(MirrorError) -> String {
        var failure: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &failure) else {
            let message = failure.map { String(cString: $0) } ?? "libpq could not parse it"
            if let failure { PQfreemem(failure) }
            throw .invalidConnectionString(message.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        defer { PQconninfoFree(options) }
        var found: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { found[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        let host = found["host"] ?? found["hostaddr"] ?? "localhost"
        let port = found["port"].map { ":\($0)" } ?? ""
        let database = found["dbname"].map { "/\($0)" } ?? ""
        let user = found["user"].map { "\($0)@" } ?? ""
        return "\(user)\(host)\(port)\(database)"
    }
}

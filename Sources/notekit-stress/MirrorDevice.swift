import Foundation
import NoteKit
import NoteKitFileStore
import NoteKitMirror
import NoteKitStressSupport

/// `notekit-stress mirror-device`: one device of the mirror's convergence test (Tests/MirrorTests,
/// MirrorConvergenceTests). It opens a FieldNotes file store mirrored to a zone, makes `--ops` random changes (notes
/// inserted, titles and bodies edited, notes deleted and moved between notebooks, notebooks made and deleted, photos
/// with external-storage bytes added, labels inserted with names from a pool of three (`--labels PREFIX`), so that
/// devices given one prefix at once collide on the unique key, with stickers added, moved and deleted; boards and
/// pins, many-to-many, linked and unlinked; labels featured on boards), each saved on its own, and syncs now and then. Lines it
/// writes:
///
///     ack N                 a save committed as transaction N (acknowledged: it must reach the server)
///     sync begin            a sync starts (the test kills some devices a moment after this: mid-push)
///     sync exported         its export is committed on the server and its import begins (or after this: mid-pull)
///     sync end REPORT       it ended
///     sync failed ERROR     it failed (the server is away); the device goes on
///     done TRANSACTION      all ops made (and, with --final, a last sync that succeeded)
///
/// The test kills it with SIGKILL at random moments and starts it again on the same store.
struct MirrorDevice {
    let url: URL
    let configuration: MirrorConfiguration
    let seed: UInt64
    let operations: Int
    let syncChance: Double
    /// Labels are named `<prefix>-alpha`, `-beta` or `-gamma`.
    let labelPrefix: String
    let final: Bool

    func run() -> Never {
        do {
            let container = try ModelContainer(for: Schema(ModelContainer.labelledFieldNotesModels),
                                               configurations: [FileStoreConfiguration(url: url)])
            let mirror = try StoreMirror(container: container, configuration: configuration)
            // The test tells a kill during the push from one during the pull by this line.
            mirror.afterExport.withLock { $0 = { FileHandle.standardOutput.write(Data("sync exported\n".utf8)) } }
            var random = SeededGenerator(seed: seed)
            let context = ModelContext(container)
            for operation in 0..<operations {
                // The first change of a run is a label: devices started together collide on its name.
                try change(context, &random, label: operation == 0)
                if context.hasChanges {
                    try context.save()
                    say("ack \(container.store.transactionNumber)")
                }
                if random.chance(syncChance) { _ = sync(mirror) }
            }
            if final {
                // Until a sync goes through (the server may be restarting).
                var synced = false
                for _ in 0..<100 where !synced {
                    synced = sync(mirror)
                    if !synced { Thread.sleep(forTimeInterval: 0.1) }
                }
                guard synced else { fatal("the final sync never succeeded") }
            }
            say("done \(container.store.transactionNumber)")
            try container.close()
            exit(0)
        } catch {
            fatal("\(error)")
        }
    }

    /// Writes `line` to standard output at once (unbuffered: the test reacts to each line as it comes).
    private func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    private func fatal(_ message: String) -> Never {
        FileHandle.standardError.write(Data("error: \(message)\n".utf8))
        exit(1)
    }

    private func sync(_ mirror: StoreMirror) -> Bool {
        say("sync begin")
        do {
            let report = try mirror.sync()
            say("sync end \(report)")
            return true
        } catch {
            say("sync failed \(error)")
            return false
        }
    }

    /// One random change, left unsaved.
    private func change(_ context: ModelContext, _ random: inout SeededGenerator, label: Bool) throws {
        let notes = try context.fetch(FetchDescriptor<NoteRecord>(sortBy: [SortDescriptor(\.title)]))
        let notebooks = try context.fetch(FetchDescriptor<NotebookRecord>(sortBy: [SortDescriptor(\.name)]))
        let word = ["ridge", "col", "lake", "pass", "moss", "scree", "cairn", "tarn"]
        let labels = try context.fetch(FetchDescriptor<LabelRecord>(sortBy: [SortDescriptor(\.name)]))
        switch label ? 100 : notes.isEmpty ? 0 : Int.random(in: 0..<135, using: &random) {
        case 0..<20:
            let note = NoteRecord()
            note.title = "\(random.pick(word)) \(Int.random(in: 0..<1000, using: &random))"
            context.insert(note)
            if !notebooks.isEmpty, random.chance(0.7) { note.notebook = random.pick(notebooks) }
        case 20..<40:
            // A small pool of titles, so that devices edit the same fields of the same notes.
            random.pick(Array(notes.prefix(5))).title = "\(random.pick(word)) edited \(Int.random(in: 0..<100, using: &random))"
        case 40..<55:
            random.pick(notes).body = String(repeating: random.pick(word) + " ", count: Int.random(in: 1...5, using: &random))
        case 55..<62:
            try context.delete(random.pick(notes))
        case 62..<75:
            let note = random.pick(notes)
            note.notebook = notebooks.isEmpty || random.chance(0.2) ? nil : random.pick(notebooks)
        case 75..<82:
            let notebook = NotebookRecord()
            notebook.name = "\(random.pick(word)) book \(Int.random(in: 0..<100, using: &random))"
            context.insert(notebook)
        case 82..<85:
            if !notebooks.isEmpty { try context.delete(random.pick(notebooks)) }
        case 85..<93:
            let bytes = (0..<Int.random(in: 1...3000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let photo = PhotoRecord(fileName: "\(random.pick(word)).jpg", data: Data(bytes))
            random.pick(notes).photos.append(photo)
        case 100..<108:
            // Three names for every device: two devices' labels of one name are one label once they have synced.
            let label = LabelRecord(name: "\(labelPrefix)-" + random.pick(["alpha", "beta", "gamma"]),
                                    color: random.pick(word))
            label.rank = Int.random(in: 0..<10, using: &random)
            context.insert(label)
            label.stickers.append(StickerRecord(text: "\(random.pick(word)) \(Int.random(in: 0..<1000, using: &random))"))
        case 108..<112:
            guard !labels.isEmpty else { return }
            random.pick(labels).stickers.append(StickerRecord(text: "\(random.pick(word)) \(Int.random(in: 0..<1000, using: &random))"))
        case 112..<115:
            guard !labels.isEmpty else { return }
            random.pick(labels).color = random.pick(word)
        case 115..<118:
            let stickers = try context.fetch(FetchDescriptor<StickerRecord>(sortBy: [SortDescriptor(\.text)]))
            guard !stickers.isEmpty, !labels.isEmpty else { return }
            let sticker = random.pick(stickers)
            if random.chance(0.3) { try context.delete(sticker) } else { sticker.label = random.pick(labels) }
        case 118..<120:
            guard !labels.isEmpty else { return }
            try context.delete(random.pick(labels))
        case 120..<123:
            let board = BoardRecord(name: "\(random.pick(word)) board \(Int.random(in: 0..<100, using: &random))")
            context.insert(board)
        case 123..<133:
            // Pins on boards (many-to-many), added and taken off; labels featured (no inverse).
            let boards = try context.fetch(FetchDescriptor<BoardRecord>(sortBy: [SortDescriptor(\.name)]))
            guard !boards.isEmpty else { return }
            let board = random.pick(boards)
            let pins = try context.fetch(FetchDescriptor<PinRecord>(sortBy: [SortDescriptor(\.text)]))
            let choice = Int.random(in: 0..<4, using: &random)
            switch pins.isEmpty && choice == 1 ? 0 : choice {
            case 0:
                let pin = PinRecord(text: "\(random.pick(word)) pin \(Int.random(in: 0..<1000, using: &random))")
                context.insert(pin)
                pin.boards = [board]
            case 1:
                let pin = random.pick(pins)
                if pin.boards.contains(where: { $0 === board }) {
                    pin.boards.removeAll { $0 === board }
                } else {
                    pin.boards.append(board)
                }
            case 2:
                if !labels.isEmpty { board.featured = [random.pick(labels)] + board.featured.prefix(1) }
            default:
                if !pins.isEmpty, random.chance(0.5) { try context.delete(random.pick(pins)) } else if random.chance(0.2) {
                    try context.delete(board)
                }
            }
        case 93..<100:
            let note = random.pick(notes)
            note.isPinned.toggle()
            note.tags = Array(word.shuffled(using: &random).prefix(Int.random(in: 0...3, using: &random)))
        default:
            break
        }
    }
}

/// `notekit-stress mirror-app`: seed 001's main app. It opens the FieldNotes store at a path mirrored to a zone and
/// syncs in the background (an interval of an hour: only what is committed to the store brings a sync on), writes
/// `ready` once its first sync is done, and runs until its standard input ends; then it stops syncing, writes
/// `stopped PENDING` (the local transactions still unsent) and exits. Its extensions (`notekit-stress add`) open the
/// same store without a mirror.
struct MirrorApp {
    let url: URL
    let configuration: MirrorConfiguration

    func run() -> Never {
        do {
            let container = try ModelContainer(for: Schema(ModelContainer.fieldNotesModels),
                                               configurations: [FileStoreConfiguration(url: url)])
            let mirror = try StoreMirror(container: container, configuration: configuration)
            mirror.startSyncing(every: .seconds(3600))
            while try mirror.status().lastSync == nil { Thread.sleep(forTimeInterval: 0.02) }
            FileHandle.standardOutput.write(Data("ready\n".utf8))
            _ = FileHandle.standardInput.readDataToEndOfFile()
            mirror.stopSyncing()
            FileHandle.standardOutput.write(Data("stopped \(try mirror.status().pendingLocalTransactions)\n".utf8))
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("error: \(error)\n".utf8))
            exit(1)
        }
    }
}

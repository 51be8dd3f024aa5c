import Foundation
import NoteKitFileStore
import NoteKitStressSupport

/// `notekit-stress compactor`: saves and compacts one store back to back (``CompactionRace/round(at:saves:round:)``)
/// until a time limit, for the readers' race test. A round that finds another process holding the lock counts as
/// locked and is tried again; any other error is written as a `failure MESSAGE` line and counted, and the rounds go
/// on. The last line is `compactions N locked M failures K`; the exit status is 0, or 1 after a failure.
enum Compactor {
    static func run(store: URL, seconds: Double) -> Never {
        let end = ContinuousClock.now + .seconds(seconds)
        var compactions = 0, locked = 0, failures = 0, round = 0
        while ContinuousClock.now < end {
            round += 1
            do {
                switch try CompactionRace.round(at: store, saves: 4, round: round) {
                case .compacted: compactions += 1
                case .locked:
                    locked += 1
                    usleep(200)
                }
            } catch {
                failures += 1
                print("failure \(error)")
            }
        }
        print("compactions \(compactions) locked \(locked) failures \(failures)")
        exit(failures == 0 ? 0 : 1)
    }
}

import Testing

/// The tests that run child processes on a store for tens of seconds and count what they did in the time given
/// (the kill tests, the share test): one at a time, so that none takes the cores another's time limit counts on.
/// The rest of the suite still runs beside them.
@Suite("Process stress tests, one at a time", .serialized)
enum ProcessStressTests {}

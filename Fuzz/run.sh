#!/usr/bin/env bash
# Builds the record decoder fuzz target (Fuzz/RecordDecoderFuzz.swift) with libFuzzer and AddressSanitizer, and runs
# it for a bounded time from a corpus made of the fixture stores' segments.
#
#   Fuzz/run.sh [seconds]          build, then fuzz for `seconds` (default 60) on one core
#   Fuzz/run.sh --reproduce FILE…  build, then run the target once on each FILE (a crash input it saved)
#
# Environment: FUZZ_DIR (default .build/fuzz) holds the build, the growing corpus and the inputs that failed
# (artifacts/); FUZZ_FLAGS adds libFuzzer flags. Fixtures/ is only read. Exits non-zero when the fuzzer found a crash,
# a hang (an input slower than 10 s), a leak or an allocation past 512 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
# Swift's backtracer would take each crash over for up to 30 s; libFuzzer reports crashes itself.
export SWIFT_BACKTRACE=enable=no

dir=${FUZZ_DIR:-.build/fuzz}
mkdir -p "$dir/corpus" "$dir/artifacts"
rm -rf "$dir/seeds"
mkdir -p "$dir/seeds"
flags=(-O -g -sanitize=fuzzer,address -parse-as-library -package-name NoteKit -swift-version 6)

# NoteKit as a static library, then NoteKitFileStore's sources and the target as one module, so the target reaches
# the file store's internal readers. Rebuilt only when a source is newer than the binary.
target="$dir/record-decoder-fuzz"
if [[ ! -x $target ]] || [[ -n $(find Sources/NoteKit Sources/NoteKitFileStore Sources/NoteKitNotes Fuzz -name '*.swift' -newer "$target") ]]; then
    echo "fuzz: building $target" >&2
    # shellcheck disable=SC2046
    swiftc "${flags[@]}" -module-name NoteKit -emit-library -static -emit-module \
        -emit-module-path "$dir/NoteKit.swiftmodule" -o "$dir/libNoteKit.a" $(find Sources/NoteKit -name '*.swift' | sort)
    # The notes domain, for its schema.
    # shellcheck disable=SC2046
    swiftc "${flags[@]}" -module-name NoteKitNotes -I "$dir" -emit-library -static -emit-module \
        -emit-module-path "$dir/NoteKitNotes.swiftmodule" -o "$dir/libNoteKitNotes.a" \
        $(find Sources/NoteKitNotes -name '*.swift' | sort)
    # shellcheck disable=SC2046
    swiftc "${flags[@]}" -module-name NoteKitFuzz -I "$dir" -L "$dir" -lNoteKit -lNoteKitNotes -o "$target" \
        $(find Sources/NoteKitFileStore -name '*.swift' | sort) Fuzz/RecordDecoderFuzz.swift 2>&1 \
        | { grep -v "ld.gold: warning: Cannot export local symbol" || true; }
fi

if [[ ${1:-} == --reproduce ]]; then
    shift
    exec "$target" -runs=1 "$@"
fi
seconds=${1:-60}

# Seeds: each fixture segment whole, its payloads one per line (what the target frames and replays), and each
# payload alone; each manifest.
for store in Fixtures/v*; do
    name=$(basename "$store")
    cp "$store/MANIFEST" "$dir/seeds/$name-manifest"
    for segment in "$store"/segments/*.seg; do
        base="$dir/seeds/$name-$(basename "$segment" .seg)"
        cp "$segment" "$base-file"
        # Line 2 is the segment record: the target writes its own.
        tail -n +3 "$segment" | cut -b 19- > "$base-payloads"
        n=0
        while IFS= read -r line; do
            n=$((n + 1))
            printf '%s' "$line" > "$base-payload-$n"
        done < <(tail -n +2 "$segment" | cut -b 19-)
    done
done

echo "fuzz: $(ls "$dir/seeds" | wc -l) seeds, $(ls "$dir/corpus" | wc -l) corpus inputs, ${seconds}s" >&2
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/" ${FUZZ_FLAGS:-} "$dir/corpus" "$dir/seeds"

# Sourced by scripts/fuzz-hls.sh, scripts/fuzz-media.sh and scripts/fuzz-protocol.sh: what building and running a swiftc libFuzzer target
# takes, once. Set OUT (the target's folder under .build-fuzz/) and NAME (for messages) before sourcing.
# Provides: SWIFTC, BIN-independent folders CORPUS SEEDS CRASHES, fuzz_build_module NAME SOURCE..., fuzz_link BIN
# MODULE SOURCES-AND-OBJECTS..., fuzz_run BIN SECONDS MAX_LEN [libFuzzer flags...].

CORPUS="$OUT/corpus"
SEEDS="$OUT/seeds"
CRASHES="$OUT/crashes"
mkdir -p "$OUT/obj" "$CORPUS" "$SEEDS" "$CRASHES"

if [[ -z "${SWIFTC:-}" ]]; then
    if command -v swiftc >/dev/null 2>&1; then SWIFTC="$(command -v swiftc)"; else SWIFTC=/opt/swift/usr/bin/swiftc; fi
fi

# Each module is compiled on its own with the package's language mode and upcoming features (so a harness uses its
# public API like a client), StowageCrypto over the COpenSSL module map; everything gets the fuzzer's coverage
# instrumentation and ASan.
FUZZ_COMMON_FLAGS=(-swift-version 6 -package-name stowage -parse-as-library -sanitize=fuzzer,address -O -g -I "$OUT/obj"
    -Xcc -fmodule-map-file=Sources/COpenSSL/module.modulemap -I Sources/COpenSSL)
FUZZ_MODULE_FLAGS=(
    -enable-upcoming-feature ExistentialAny
    -enable-upcoming-feature MemberImportVisibility
    -enable-upcoming-feature InternalImportsByDefault
)
FUZZ_LINK_FLAGS=(-lcrypto)
if [[ -x "$(dirname "$SWIFTC")/ld.lld" ]]; then FUZZ_LINK_FLAGS+=(-use-ld=lld); fi  # gold prints pages of ASan warnings

fuzz_build_module() {  # MODULE SOURCE...
    local module="$1"
    shift
    echo "$NAME: compiling $# $module sources"
    "$SWIFTC" "${FUZZ_COMMON_FLAGS[@]}" "${FUZZ_MODULE_FLAGS[@]}" -module-name "$module" -wmo \
        -emit-module -emit-module-path "$OUT/obj/$module.swiftmodule" -emit-object -o "$OUT/obj/$module.o" "$@"
}

fuzz_link() {  # BIN MODULE SOURCE-OR-OBJECT...
    local bin="$1" module="$2"
    shift 2
    echo "$NAME: linking $bin"
    "$SWIFTC" "${FUZZ_COMMON_FLAGS[@]}" "${FUZZ_LINK_FLAGS[@]}" -module-name "$module" "$@" -o "$bin.tmp"
    mv -f "$bin.tmp" "$bin"
}

# Fuzzes for SECONDS over the corpus and the seeds; exits non-zero (naming the new artifacts and how to reproduce
# them) when libFuzzer reports a crash, a timeout over 10 s for one input, or a leak.
fuzz_run() {  # BIN SECONDS MAX_LEN [libFuzzer flags...]
    local bin="$1" seconds="$2" max_len="$3"
    shift 3
    local before after status=0
    before="$(find "$CRASHES" -type f | wc -l)"
    echo "$NAME: fuzzing for ${seconds}s (corpus $CORPUS, seeds $SEEDS, crashes -> $CRASHES/)"
    # Swift's crash backtracer and ASan deadlock on each other: the run would hang instead of reporting.
    export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"
    "$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$CRASHES/" -print_final_stats=1 "$@" "$CORPUS" "$SEEDS" || status=$?
    after="$(find "$CRASHES" -type f | wc -l)"
    if [[ $status -ne 0 || $after -gt $before ]]; then
        echo "$NAME: FAILED (libFuzzer exit $status); new artifacts in $CRASHES/:" >&2
        find "$CRASHES" -type f -newer "$bin" -print >&2 || true
        echo "$NAME: reproduce with: SWIFT_BACKTRACE=enable=no $bin <file>" >&2
        exit $((status == 0 ? 1 : status))
    fi
    echo "$NAME: no crashes"
}

#!/usr/bin/env bash
# The cron slot ledger at scale: JOBS hourly jobs run for SLOTS hours (a
# week by default), every slot claimed, ended and the history trimmed
# through the ledger's own code, as the gateway's runner does it, in a
# fresh state store (examples/cron_ledger.rs); then the state store's
# size on disk (at the end, and the largest on the way, its write-ahead
# log included) and the ledger's rows.
#
#   bench/cron_ledger.sh                  (JOBS=100000 SLOTS=168)
#   JOBS=10000 SLOTS=48 bench/cron_ledger.sh   (a quick look)
source "$(dirname "$0")/lib.sh"
JOBS="${JOBS:-100000}"
SLOTS="${SLOTS:-168}"
echo "building the ledger example in release mode..." >&2
(cd "$BENCH_ROOT" && cargo build --release --quiet --example cron_ledger)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "cron slot ledger, release, $(nproc) cores: $JOBS hourly jobs, $SLOTS slots each"
"$BENCH_ROOT/target/release/examples/cron_ledger" "$JOBS" "$SLOTS" "$work/state"

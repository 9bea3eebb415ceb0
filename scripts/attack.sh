#!/usr/bin/env bash
# Runs the lease's attack suite on its own (docs/SECURITY.md): AttackTests performs each attack through the command
# line and the files (sqlite3, rm, cp, faketime, strace, a second key server, runuser as another user, curl), AttackServerTests
# against the key server, IssuanceConformanceTests runs every lease kind against every rule on SQLite and
# PostgreSQL, and LeaseIntegrityTests and AnchorChangeTimeTests make every edit a curious user can make to the key
# store's rows and files. The hostile peers' findings of the later rounds run with them: escape sequences and line
# feeds from a playlist, a server or a typed value (InspectTests, ErrorShapeTests.argumentErrors), a key server trickling
# its answer (KeySessionTests), a killed writer's temporary key file (KeyStoreLeaseTests). Needs what scripts/test.sh
# needs (it installs what is missing); the tests that act as another Unix user
# run only as root (they say so when skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
source scripts/postgres.sh
stowage_ensure_deps

echo "==> swift build --build-tests"
swift build --build-tests

stowage_start_postgres
echo "==> the attack suite"
swift test --skip-build --filter 'AttackTests|AttackServerTests|IssuanceConformanceTests|LeaseIntegrityTests|AnchorChangeTimeTests|escapeSequencesAreShownNotObeyed|argumentErrors|anAnswerTrickledInIsCutOffAtTheSessionTimeout|aKilledWritersTemporaryFileIsRemovedWhenTheStoreOpens|aFailureMessageCannotForgeARowOfList|anOversizedAnswerKeepsItsStatus'

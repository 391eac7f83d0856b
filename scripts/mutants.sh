#!/usr/bin/env bash
# Runs the mutation check (tools/cmd/mutants; docs/mutants.md): each
# mutation of tools/mutants/mutations.txt breaks one of the README's
# guarantees in a scratch copy of the working tree, and the tests it names
# must fail. Arguments go to the command: -only id,id, -list, -j N, -race.
#
# The tests run against TEST_DATABASE_URL when set; else the command starts
# one throwaway local PostgreSQL for the whole run, from the binaries
# scripts/ensure-postgres.sh installs when missing (as make test does).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/ensure-postgres.sh
cd tools
exec go run ./cmd/mutants "$@"

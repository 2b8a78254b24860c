#!/usr/bin/env bash
# Builds the etcd and kube-apiserver binaries that package testenv starts.
#
# This is cmd/testbin, run from this checkout: it compiles both from the
# tools module embedded in internal/testbin (go.mod.txt and go.sum.txt, the
# one copy of the pinned versions), fetched through the Go module proxy.
# Downstream modules run the same program with
#   go run github.com/ctrlhost/ctrlhost/cmd/testbin@<ctrlhost version>
#
# Running it again is cheap: a binary that is present and reports the
# expected version is left alone, and an interrupted build never leaves a
# half-written binary behind.
#
# Environment:
#   TESTBIN_DIR  output directory (default: _output/testbin/<version>, where
#                testenv looks first when run inside this repository)
#   GO           the go command to use (default: go)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GO="${GO:-go}"
cd "${ROOT}"

command -v "${GO}" >/dev/null 2>&1 || { echo "testbin: error: the go command (${GO}) is not on PATH" >&2; exit 1; }

if [[ -z "${TESTBIN_DIR:-}" ]]; then
  TESTBIN_DIR="${ROOT}/_output/testbin/$("${GO}" run ./cmd/testbin -print-version)"
fi
exec "${GO}" run ./cmd/testbin -go "${GO}" -dir "${TESTBIN_DIR}"

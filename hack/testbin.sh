#!/usr/bin/env bash
# Builds the etcd and kube-apiserver binaries that package testenv starts.
#
# Both are compiled from the tools module in hack/testbin, whose go.mod pins
# k8s.io/kubernetes and go.etcd.io/etcd/server/v3; the modules come through the
# Go module proxy like any other dependency. The binaries land in
# _output/testbin/<kubernetes version>/, the directory testenv looks in by
# default.
#
# Running it again is cheap: a binary that is present and reports the expected
# version is left alone. Each binary is linked under a temporary name and
# renamed into place only after it ran, so an interrupted build never leaves a
# half-written binary behind.
#
# Environment:
#   TESTBIN_DIR  output directory (default: _output/testbin/<version>)
#   GO           the go command to use (default: go)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${ROOT}/hack/testbin"
GO="${GO:-go}"

# The tools module is not part of any workspace; keep a go.work elsewhere in
# the tree from getting in the way.
export GOWORK=off

log() { printf 'testbin: %s\n' "$*" >&2; }
die() { printf 'testbin: error: %s\n' "$*" >&2; exit 1; }

command -v "${GO}" >/dev/null 2>&1 || die "the go command (${GO}) is not on PATH"
[[ -f "${TOOLS}/go.mod" ]] || die "tools module not found: ${TOOLS}/go.mod"

# module_version prints the version of a module as the tools module selects it.
module_version() {
  "${GO}" list -C "${TOOLS}" -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$1" \
    || die "cannot read the version of $1 from ${TOOLS}/go.mod"
}

KUBE_VERSION="$(module_version k8s.io/kubernetes)"
ETCD_VERSION="$(module_version go.etcd.io/etcd/server/v3)"
[[ "${KUBE_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+ ]] \
  || die "unexpected k8s.io/kubernetes version ${KUBE_VERSION}"
KUBE_MAJOR="${BASH_REMATCH[1]}"
KUBE_MINOR="${BASH_REMATCH[2]}"

OUT="${TESTBIN_DIR:-${ROOT}/_output/testbin/${KUBE_VERSION}}"
mkdir -p "${OUT}"
OUT="$(cd "${OUT}" && pwd)"

# The version a kube-apiserver built from the module reports is whatever the
# linker is told; without these it would say v0.0.0-master.
kube_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION}"
  kube_ldflags+=" -X ${pkg}.gitMajor=${KUBE_MAJOR}"
  kube_ldflags+=" -X ${pkg}.gitMinor=${KUBE_MINOR}"
  kube_ldflags+=" -X ${pkg}.gitTreeState=clean"
done

TMP_FILES=()
cleanup() {
  local f
  for f in "${TMP_FILES[@]+"${TMP_FILES[@]}"}"; do
    rm -f -- "${f}"
  done
}
trap cleanup EXIT

# reports_version BINARY WANT: true when `BINARY --version` mentions WANT.
reports_version() {
  local bin="$1" want="$2" out
  [[ -x "${bin}" ]] || return 1
  out="$("${bin}" --version 2>&1)" || return 1
  grep -qF -- "${want}" <<<"${out}"
}

# build NAME PACKAGE WANT [LDFLAGS]
build() {
  local name="$1" pkg="$2" want="$3" ldflags="${4:-}"
  local dest="${OUT}/${name}"
  if reports_version "${dest}" "${want}"; then
    log "${name}: up to date (${dest} reports \"${want}\")"
    return 0
  fi
  if [[ -e "${dest}" ]]; then
    log "${name}: ${dest} does not report \"${want}\"; rebuilding"
  fi
  local tmp="${OUT}/.${name}.tmp.$$"
  TMP_FILES+=("${tmp}")
  log "${name}: building ${pkg} (${want}) -> ${dest}"
  local start=${SECONDS}
  if ! "${GO}" build -C "${TOOLS}" -o "${tmp}" -ldflags "${ldflags}" "${pkg}"; then
    die "${name}: go build of ${pkg} failed (see the output above)"
  fi
  if ! reports_version "${tmp}" "${want}"; then
    die "${name}: the freshly built binary does not report \"${want}\"; its --version says: $("${tmp}" --version 2>&1 | head -n 3 || true)"
  fi
  mv -f -- "${tmp}" "${dest}"
  log "${name}: done in $((SECONDS - start))s"
}

build etcd go.etcd.io/etcd/server/v3 "etcd Version: ${ETCD_VERSION#v}"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "Kubernetes ${KUBE_VERSION}" "${kube_ldflags# }"

log "binaries in ${OUT}:"
ls -l "${OUT}/etcd" "${OUT}/kube-apiserver" >&2

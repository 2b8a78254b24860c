#!/usr/bin/env bash
# Compares the widget operator on ctrlhost (examples/widget-operator, package
# main of the root module) with its twin on controller-runtime
# (examples/widget-operator/controllerruntime, a module of its own) and prints
# a markdown table:
#
#   - lines (wc -l) of main.go, of the other non-test .go files (the
#     controllers) and of the *_test.go files, in each operator's own
#     directory; the api/ types are left out of both, and so is
#     handoff_bench_test.go (it measures both operators, it tests neither);
#   - the names of the library each one uses, tests included
#     (hack/libnames): what a newcomer must learn;
#   - a cold build: `go build` with an empty GOCACHE, modules already
#     downloaded, its wall time, the binary's size and the number of modules
#     linked into it.
#
# The ratio column is ctrlhost / controller-runtime. Builds go to a temporary
# directory, removed on exit. If an operator does not build, its cells say so
# and the script exits 1 after printing the table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

names=(ctrlhost controller-runtime)
dirs=(examples/widget-operator examples/widget-operator/controllerruntime)
prefixes=(github.com/ctrlhost/ctrlhost/ sigs.k8s.io/controller-runtime/)
status=0

# lines FILE... prints the total line count of the files, 0 for none.
lines() {
	if (($# == 0)); then
		echo 0
	else
		cat "$@" | wc -l | tr -d ' '
	fi
}

declare -A main_lines ctrl_lines test_lines lib_names build_secs size_mb modules
for i in "${!names[@]}"; do
	name="${names[$i]}"
	dir="${dirs[$i]}"

	shopt -s nullglob
	tests=()
	for f in "$dir"/*_test.go; do
		[[ "$f" == */handoff_bench_test.go ]] || tests+=("$f")
	done
	controllers=()
	for f in "$dir"/*.go; do
		case "$f" in
		*_test.go | */main.go) ;;
		*) controllers+=("$f") ;;
		esac
	done
	shopt -u nullglob
	main_lines[$name]="$(lines "$dir/main.go")"
	ctrl_lines[$name]="$(lines "${controllers[@]}")"
	test_lines[$name]="$(lines "${tests[@]}")"
	lib_names[$name]="$(go run ./hack/libnames -dir "$dir" -prefix "${prefixes[$i]}" -tags integration)"

	bin="$tmp/$name.bin"
	cache="$(mktemp -d "$tmp/gocache.XXXXXX")"
	# Download first, so that the timed build does not.
	if (cd "$dir" && go mod download && go list -deps . >/dev/null) &&
		start="$(date +%s.%N)" &&
		(cd "$dir" && GOCACHE="$cache" go build -o "$bin" .); then
		end="$(date +%s.%N)"
		build_secs[$name]="$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')"
		size_mb[$name]="$(awk -v b="$(stat -c %s "$bin")" 'BEGIN { printf "%.1f", b / 1e6 }')"
		modules[$name]="$(go version -m "$bin" | grep -c $'^\tdep' || true)"
	else
		echo "compare-operators: $dir does not build" >&2
		build_secs[$name]="build failed"
		size_mb[$name]="build failed"
		modules[$name]="build failed"
		status=1
	fi
	rm -rf "$cache"
done

# ratio A B prints A/B to two decimals, or n/a when either is not a number.
ratio() {
	if [[ "$1" =~ ^[0-9.]+$ && "$2" =~ ^[0-9.]+$ ]]; then
		awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'
	else
		echo n/a
	fi
}

# row LABEL ARRAY prints one table row from the associative array named ARRAY.
row() {
	local -n values="$2"
	local a="${values[ctrlhost]}" b="${values[controller-runtime]}"
	printf '| %s | %s | %s | %s |\n' "$1" "$a" "$b" "$(ratio "$a" "$b")"
}

declare -A total_lines
for name in "${names[@]}"; do
	total_lines[$name]=$((${main_lines[$name]} + ${ctrl_lines[$name]}))
done

echo "| | ctrlhost | controller-runtime | ratio |"
echo "|---|---:|---:|---:|"
row "main.go (lines)" main_lines
row "controllers (lines)" ctrl_lines
row "non-test code, api/ excluded (lines)" total_lines
row "tests (lines)" test_lines
row "library names used, tests included" lib_names
row "cold build, empty GOCACHE (s)" build_secs
row "binary size (MB)" size_mb
row "modules linked" modules
exit "$status"

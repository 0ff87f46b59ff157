#!/usr/bin/env bash
# Build the servers gpumon is tested against from their Go modules, into a cache outside the repo:
#   ${GPUMON_TOOLS:-~/.cache/gpumon-tools}/<name>-<version>/bin/
# Skips what is already built, prints the versions. Versions are pinned in tools/versions.env.
# Uses the ordinary Go client and the Go module proxy; nothing fetched is ever written into the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../tools/versions.env
. tools/versions.env
CACHE="${GPUMON_TOOLS:-$HOME/.cache/gpumon-tools}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}" GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
command -v go >/dev/null || { echo "build-tools: go not found (the polyglot machine has it)" >&2; exit 2; }

stamp() {  # -X flags so `--version` prints the release, not an empty string
  echo "-X github.com/prometheus/common/version.Version=$1 -X github.com/prometheus/common/version.Revision=$2 -X github.com/prometheus/common/version.Branch=module -X github.com/prometheus/common/version.BuildUser=gpumon-build-tools"
}

# module_dir MODULE VERSION: download the module (go mod download) and print its read-only folder.
module_dir() {
  go mod download -json "$1@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

# build NAME VERSION MODULE MODULE_VERSION PACKAGE...: go build inside the downloaded module, so its
# own go.mod (replace directives included) decides every dependency version, as a release build does.
build() {
  local name=$1 version=$2 module=$3 modver=$4; shift 4
  local bin="$CACHE/$name-$version/bin" started=$SECONDS missing=0 pkg
  for pkg in "$@"; do [ -x "$bin/$(basename "$pkg")" ] || missing=1; done
  if [ "$missing" = 0 ]; then echo "build-tools: $name $version cached in $bin"; return; fi
  echo "build-tools: building $name $version ($module@$modver) into $bin"
  local dir; dir=$(module_dir "$module" "$modver")
  mkdir -p "$bin.tmp"
  for pkg in "$@"; do
    (cd "$dir" && go build -trimpath -ldflags "$(stamp "$version" "$modver")" -o "$bin.tmp/$(basename "$pkg")" "./$pkg")
  done
  mkdir -p "$bin" && mv "$bin.tmp"/* "$bin"/ && rmdir "$bin.tmp"
  echo "build-tools: $name $version built in $((SECONDS - started)) s"
}

build prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION" cmd/prometheus cmd/promtool
build thanos "$THANOS_VERSION" github.com/thanos-io/thanos "$THANOS_MODULE_VERSION" cmd/thanos

"$CACHE/prometheus-$PROMETHEUS_VERSION/bin/prometheus" --version 2>&1 | head -1
"$CACHE/prometheus-$PROMETHEUS_VERSION/bin/promtool" --version 2>&1 | head -1
"$CACHE/thanos-$THANOS_VERSION/bin/thanos" --version 2>&1 | head -1

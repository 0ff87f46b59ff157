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

stamp() {  # stamp MODULE VERSION MODULE_VERSION: -X flags so `--version` prints the release, not an empty string
  case "$1" in
    github.com/VictoriaMetrics/*) echo "-X github.com/VictoriaMetrics/VictoriaMetrics/lib/buildinfo.Version=v$2" ;;
    *) echo "-X github.com/prometheus/common/version.Version=$2 -X github.com/prometheus/common/version.Revision=$3 -X github.com/prometheus/common/version.Branch=module -X github.com/prometheus/common/version.BuildUser=gpumon-build-tools" ;;
  esac
}

# module_dir MODULE VERSION: download the module (go mod download) and print its read-only folder.
module_dir() {
  go mod download -json "$1@$2" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'
}

# promu_tags DIR: the build tags of the project's own release build (`build.tags.all` in its
# .promu.yml), e.g. Thanos' `slicelabels`: without it Thanos Query panics decoding labels.
promu_tags() {
  python3 - "$1/.promu.yml" <<'PY'
import re, sys
try:
    text = open(sys.argv[1]).read()
except OSError:
    sys.exit(0)
block = re.search(r"\n\s+tags:\s*\n\s+all:\s*\n((?:\s+-\s*\S+\s*\n)+)", text)
# builtinassets embeds the web UI, which needs an npm build first; gpumon only uses the API
tags = [t for t in re.findall(r"-\s*(\S+)", block.group(1)) if t != "builtinassets"] if block else []
print(",".join(tags))
PY
}

# without_web_ui MODULE DIR: print the folder to build in. Alertmanager embeds its web UI from
# ui/app/dist, which only its npm build creates (the module ships without it), so it is built in a
# writable copy with an empty placeholder UI; gpumon only uses the API.
without_web_ui() {
  if [ "$1" != github.com/prometheus/alertmanager ]; then echo "$2"; return; fi
  local copy="$CACHE/.src/$(basename "$2")"
  if [ ! -d "$copy" ]; then
    rm -rf "$copy.tmp" && mkdir -p "$copy.tmp" && cp -R "$2/." "$copy.tmp" && chmod -R u+w "$copy.tmp"
    for ui in elm mantine; do
      mkdir -p "$copy.tmp/ui/app/dist/$ui"
      echo '<!doctype html><title>Alertmanager</title><p>web UI not built; the API is at /api/v2/' \
        > "$copy.tmp/ui/app/dist/$ui/index.html"
    done
    mv "$copy.tmp" "$copy"
  fi
  echo "$copy"
}

# build NAME VERSION MODULE MODULE_VERSION PACKAGE...: go build inside the downloaded module, so its
# own go.mod (replace directives included) decides every dependency version, as a release build does,
# with the build tags of its release build.
build() {
  local name=$1 version=$2 module=$3 modver=$4; shift 4
  local bin="$CACHE/$name-$version/bin" started=$SECONDS missing=0 pkg dir tags
  dir=$(module_dir "$module" "$modver"); tags=$(promu_tags "$dir")
  dir=$(without_web_ui "$module" "$dir")
  # the recipe (tags, flags) is part of what is cached: a binary built another way is rebuilt
  local recipe="tags=$tags ldflags=$(stamp "$module" "$version" "$modver")"
  for pkg in "$@"; do [ -x "$bin/$(basename "$pkg")" ] || missing=1; done
  [ "$(cat "$bin/.recipe" 2>/dev/null)" = "$recipe" ] || missing=1
  if [ "$missing" = 0 ]; then echo "build-tools: $name $version cached in $bin"; return; fi
  echo "build-tools: building $name $version ($module@$modver, tags: ${tags:-none}) into $bin"
  rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
  for pkg in "$@"; do
    (cd "$dir" && go build -trimpath -tags "$tags" -ldflags "$(stamp "$module" "$version" "$modver")" \
      -o "$bin.tmp/$(basename "$pkg")" "./$pkg")
  done
  echo "$recipe" > "$bin.tmp/.recipe"
  rm -rf "$bin" && mv "$bin.tmp" "$bin"
  echo "build-tools: $name $version built in $((SECONDS - started)) s"
}

build prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus "$PROMETHEUS_MODULE_VERSION" cmd/prometheus cmd/promtool
build thanos "$THANOS_VERSION" github.com/thanos-io/thanos "$THANOS_MODULE_VERSION" cmd/thanos
build alertmanager "$ALERTMANAGER_VERSION" github.com/prometheus/alertmanager "$ALERTMANAGER_MODULE_VERSION" cmd/alertmanager cmd/amtool
build victoriametrics "$VICTORIAMETRICS_VERSION" github.com/VictoriaMetrics/VictoriaMetrics "$VICTORIAMETRICS_MODULE_VERSION" app/victoria-metrics app/vmalert

"$CACHE/prometheus-$PROMETHEUS_VERSION/bin/prometheus" --version 2>&1 | head -1
"$CACHE/prometheus-$PROMETHEUS_VERSION/bin/promtool" --version 2>&1 | head -1
"$CACHE/thanos-$THANOS_VERSION/bin/thanos" --version 2>&1 | head -1
"$CACHE/alertmanager-$ALERTMANAGER_VERSION/bin/alertmanager" --version 2>&1 | head -1
"$CACHE/victoriametrics-$VICTORIAMETRICS_VERSION/bin/victoria-metrics" --version 2>&1 | head -1

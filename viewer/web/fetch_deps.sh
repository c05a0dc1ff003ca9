#!/usr/bin/env bash
# The web build's set-up step (`make web` runs it): what emscripten needs beside
# Debian's binary packages, fetched into the build folder, never into the repository.
#
#  1. Dear ImGui 1.86's core sources (imgui.cpp, imgui_draw.cpp, ...). Debian's
#     libimgui-dev ships a compiled x86 library, which a WebAssembly link cannot use;
#     Debian's *source* package `imgui` 1.86 has the sources. `apt-get source` needs a
#     deb-src line: a private apt configuration under DEPS/apt names Debian's own
#     registry (the URIs and suite of /etc/apt/sources.list.d) for sources, so the
#     machine's apt configuration is left as it is, and no root is needed.
#  2. DEPS/include: the header-only libraries of Debian's binary packages the engine
#     uses (CLI11, nlohmann-json), linked one by one. emcc must not see /usr/include
#     whole: glibc's headers there would shadow emscripten's musl.
#
# Usage: viewer/web/fetch_deps.sh DEPS   (default build-web/deps). Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
deps="${1:-$root/build-web/deps}"
mkdir -p "$deps"
deps="$(cd "$deps" && pwd)"

imgui_dir="$deps/imgui-1.86"
if [ ! -f "$imgui_dir/imgui.cpp" ]; then
  apt_dir="$deps/apt"
  mkdir -p "$apt_dir/sources.list.d" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  cat > "$apt_dir/sources.list.d/debian-src.sources" <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
            -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
            -o "Debug::NoLocking=1" -o "APT::Sandbox::User=$(id -un)")
  echo "fetch_deps: Debian source package imgui (apt-get source, deb-src of deb.debian.org bookworm)"
  apt-get "${apt_opts[@]}" -qq update
  (cd "$apt_dir" && apt-get "${apt_opts[@]}" -qq source --download-only imgui=1.86+ds-1)
  # The upstream tarball is what we compile; Debian's patches only add its Makefile.
  tar -xf "$apt_dir"/imgui_1.86+ds.orig.tar.xz -C "$deps"
  test -f "$imgui_dir/imgui.cpp"
fi

inc="$deps/include"
mkdir -p "$inc"
for h in /usr/include/CLI /usr/include/nlohmann; do
  [ -e "$h" ] || { echo "fetch_deps: $h missing (apt install libcli11-dev nlohmann-json3-dev)" >&2; exit 1; }
  ln -sfn "$h" "$inc/$(basename "$h")"
done
echo "fetch_deps: ready in $deps (imgui-1.86/, include/)"

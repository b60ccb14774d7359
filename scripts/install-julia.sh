#!/bin/sh
# Installs Julia 1.5.3 on Debian 12 (bookworm), as root, for bindings/julia. Idempotent.
#
# Why it looks like this (facts verified on these machines):
# - bookworm ships no Julia and no Julia registry is reachable; Debian 11 (bullseye) ships Julia
#   1.5.3, which installs on bookworm when only `julia` and the nine libraries bookworm lacks are
#   taken from bullseye (an apt pin keeps everything else on bookworm).
# - bookworm's libunwind 1.6 makes every exception thrown from compiled Julia 1.5 code segfault;
#   the wrapper below loads bullseye's libunwind 1.3 for Julia only (the system library stays).
# - A Rust panic inside a cdylib loaded into Julia aborts the process even when caught by
#   catch_unwind unless libgcc_s.so.1 is preloaded; the wrapper preloads it.
# - Pkg.test() wants a registry even for a stdlib-only package: an empty local one keeps it
#   offline (written into the first depot).
#
# A working `julia` already on PATH (e.g. a current official build) is left alone.
set -eu

depot=${JULIA_DEPOT_PATH:-$HOME/.julia}
depot=${depot%%:*}
offline_registry() {
  mkdir -p "$depot/registries/Offline"
  [ -f "$depot/registries/Offline/Registry.toml" ] ||
    printf 'name = "Offline"\nuuid = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"\nrepo = ""\n\n[packages]\n' \
      >"$depot/registries/Offline/Registry.toml"
}
throw_test='f() = error("x"); try f(); catch; exit(0); end; exit(1)'

if command -v julia >/dev/null 2>&1 && julia -e "$throw_test" >/dev/null 2>&1; then
  offline_registry
  echo "install-julia: julia already works: $(julia -v)"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-julia: needs root (apt) to install Julia; or put a working julia on PATH" >&2
  exit 1
fi
. /etc/os-release
if [ "${VERSION_CODENAME:-}" != bookworm ] && [ "${VERSION_CODENAME:-}" != bullseye ]; then
  echo "install-julia: tested on Debian 12 only (this is ${PRETTY_NAME:-unknown}); trying anyway" >&2
fi

if [ ! -x /usr/bin/julia ]; then
  # Reuse the mirror this machine's own Debian sources already name.
  uris=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 2)
  main=$(echo "$uris" | grep -v security | head -n 1 || true)
  sec=$(echo "$uris" | grep security | head -n 1 || true)
  [ -n "$main" ] || main=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$main" ] || main=http://deb.debian.org/debian
  [ -n "$sec" ] || sec=$(echo "$main" | sed 's#/debian/*$#/debian-security#')
  cat >/etc/apt/sources.list.d/bullseye-julia.sources <<EOT
Types: deb
URIs: $main
Suites: bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $sec
Suites: bullseye-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOT
  pkgs="julia julia-common libjulia1 libllvm9 libgit2-1.1 libmbedtls12 libmbedcrypto3 libmbedx509-0 libopenlibm3 libffi7"
  cat >/etc/apt/preferences.d/julia-bullseye.pref <<EOT
Package: *
Pin: release n=bullseye
Pin-Priority: -10

Package: *
Pin: release n=bullseye-security
Pin-Priority: -10

Package: $pkgs
Pin: release n=bullseye
Pin-Priority: 500

Package: $pkgs
Pin: release n=bullseye-security
Pin-Priority: 500
EOT
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends julia >/dev/null
fi

compat=/opt/julia-1.5-compat/lib
if ! ls "$compat"/libunwind.so.8 >/dev/null 2>&1; then
  tmp=$(mktemp -d); chmod 755 "$tmp"  # apt-get download runs as _apt
  (cd "$tmp" && apt-get download -qq libunwind8/bullseye && dpkg-deb -x libunwind8_*.deb x)
  mkdir -p "$compat"
  cp -a "$tmp"/x/usr/lib/*-linux-gnu/libunwind.so.8* "$compat"/
  rm -rf "$tmp"
fi

libgcc=$(ls /usr/lib/*-linux-gnu/libgcc_s.so.1 /lib/*-linux-gnu/libgcc_s.so.1 2>/dev/null | head -n 1)
cat >/usr/local/bin/julia <<EOT
#!/bin/sh
# Julia 1.5.3 from bullseye on bookworm (written by anyffi scripts/install-julia.sh):
# bullseye's libunwind (bookworm's 1.6 crashes every throw), and libgcc_s preloaded (otherwise a
# Rust panic inside a loaded cdylib aborts even when caught by catch_unwind).
export LD_LIBRARY_PATH="$compat\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export LD_PRELOAD="$libgcc\${LD_PRELOAD:+ \$LD_PRELOAD}"
exec /usr/bin/julia "\$@"
EOT
chmod 755 /usr/local/bin/julia
hash -r 2>/dev/null || true
offline_registry
/usr/local/bin/julia -e 'f() = error("x"); try f(); catch; println("install-julia: julia ", VERSION, " ok"); end'

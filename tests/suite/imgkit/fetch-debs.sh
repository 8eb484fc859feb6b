#!/usr/bin/env bash
# Downloads (with the host's apt, from its configured mirrors) the Debian
# packages the image-build tests serve from a loopback apt repository: the
# essential set and apt (what `mmdebstrap --variant=apt` installs) plus
# python3-pip and python3-pytest, with their dependencies. CI runs it
# (.ci/run); the tests themselves only ever talk to 127.0.0.1.
#
#   tests/suite/imgkit/fetch-debs.sh [DIR]     (default /var/cache/cbrun-ci/debs)
set -euo pipefail
dir=${1:-/var/cache/cbrun-ci/debs}
mkdir -p "$dir"
cd "$dir"
# A fresh machine may have no package lists yet.
apt-cache show python3-pytest >/dev/null 2>&1 || apt-get update -qq
ess=$(apt-cache dumpavail | awk '/^Package:/{p=$2} /^Essential: yes/{print p}' | sort -u)
pkgs=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances apt python3-pip python3-pytest $ess \
    | grep '^[a-z0-9]' | sort -u)
# Only what is missing (a second run downloads nothing).
want=()
for p in $pkgs; do
    compgen -G "${p}_*.deb" >/dev/null || want+=("$p")
done
if [ "${#want[@]}" -gt 0 ]; then
    chown _apt "$dir" 2>/dev/null || true
    apt-get download -q "${want[@]}"
fi
chmod -R a+rX "$dir"
ls "$dir"/*.deb | wc -l

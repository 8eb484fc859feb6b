#!/bin/sh
# Makes an apt repository (suite bookworm, component main, unsigned: the
# sources line says [trusted=yes]) in OUT/debian from the .debs in DEBS.
# Only dpkg-deb and coreutils: no dpkg-dev or apt-utils needed.
#
#   tests/suite/imgkit/mkrepo.sh DEBS OUT
set -eu
debs=$1 out=$2
arch=$(dpkg --print-architecture)
pool=$out/debian/pool/main
bin=$out/debian/dists/bookworm/main/binary-$arch
mkdir -p "$pool" "$bin"
: > "$bin/Packages"
for f in "$debs"/*.deb; do
    b=$(basename "$f")
    ln -f "$f" "$pool/$b" 2>/dev/null || cp "$f" "$pool/$b"
    dpkg-deb -f "$f" >> "$bin/Packages"
    printf 'Filename: pool/main/%s\nSize: %s\nSHA256: %s\n\n' "$b" \
        "$(stat -c %s "$f")" "$(sha256sum < "$f" | cut -d' ' -f1)" >> "$bin/Packages"
done
gzip -9nk "$bin/Packages"
rel=$out/debian/dists/bookworm/Release
{
    printf 'Origin: cbrun-test\nLabel: cbrun-test\nSuite: bookworm\nCodename: bookworm\n'
    printf 'Date: %s\nArchitectures: %s\nComponents: main\nSHA256:\n' "$(LC_ALL=C date -u -R)" "$arch"
    for p in Packages Packages.gz; do
        printf ' %s %s main/binary-%s/%s\n' "$(sha256sum < "$bin/$p" | cut -d' ' -f1)" \
            "$(stat -c %s "$bin/$p")" "$arch" "$p"
    done
} > "$rel"
chmod -R a+rX "$out"

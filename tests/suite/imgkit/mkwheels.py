"""Writes pure-Python wheels and a PEP 503 "simple" index for them.

    python3 mkwheels.py OUT

OUT/simple/<name>/index.html links each wheel (with its #sha256), served by
any static HTTP server: pip takes it as its index (PIP_INDEX_URL). The
packages stand in for what the img-apt-pip fixture's recipe pins:

- romanum-testkit 1.4.2 (module romanum_testkit), which requires
  numeral-tables>=2.0,<3;
- numeral-tables 1.9.0, 2.1.0 and 3.0.0 (module numeral_tables, which
  knows its own version), so that a resolver picking outside the range is
  seen;
- fakeban 0.3.0 (package fakeban and module fakebanmod): the banned
  upstream that an image's own dependencies bring in.
"""

import base64
import hashlib
import os
import sys
import zipfile

PACKAGES = [
    ("romanum-testkit", "1.4.2", ["numeral-tables>=2.0,<3"], {
        "romanum_testkit/__init__.py":
            "from numeral_tables import VERSION as TABLES_VERSION, TABLE\n"
            "SAMPLES = {1: 'I', 4: 'IV', 9: 'IX', 14: 'XIV', 40: 'XL', 90: 'XC',\n"
            "           400: 'CD', 1994: 'MCMXCIV', 2024: 'MMXXIV', 3999: 'MMMCMXCIX'}\n",
    }),
    ("numeral-tables", "1.9.0", [], {
        "numeral_tables/__init__.py": "VERSION = '1.9.0'\nTABLE = None\n",
    }),
    ("numeral-tables", "2.1.0", [], {
        "numeral_tables/__init__.py":
            "VERSION = '2.1.0'\n"
            "TABLE = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'),\n"
            "         (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'),\n"
            "         (5, 'V'), (4, 'IV'), (1, 'I')]\n",
    }),
    ("numeral-tables", "3.0.0", [], {
        "numeral_tables/__init__.py": "VERSION = '3.0.0'\nTABLE = None\n",
    }),
    ("fakeban", "0.3.0", [], {
        "fakeban/__init__.py": "ANSWER = 42\n",
        "fakebanmod.py": "ANSWER = 42\n",
    }),
]


def record_hash(data):
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + d.decode()


def wheel(out, name, version, requires, files):
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    entries = dict(files)
    entries[f"{info}/METADATA"] = meta
    entries[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: cbrun-tests\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n"
    )
    top = sorted({p.split("/")[0].removesuffix(".py") for p in files})
    entries[f"{info}/top_level.txt"] = "".join(t + "\n" for t in top)
    record = "".join(
        f"{p},{record_hash(d.encode())},{len(d.encode())}\n" for p, d in entries.items()
    )
    entries[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    fname = f"{dist}-{version}-py3-none-any.whl"
    path = os.path.join(out, fname)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in entries.items():
            zi = zipfile.ZipInfo(p, date_time=(2024, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, d)
    return fname


def main(out):
    links = {}
    files_dir = os.path.join(out, "files")
    os.makedirs(files_dir, exist_ok=True)
    for name, version, requires, files in PACKAGES:
        fname = wheel(files_dir, name, version, requires, files)
        with open(os.path.join(files_dir, fname), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        links.setdefault(name, []).append((fname, digest))
    os.makedirs(os.path.join(out, "simple"), exist_ok=True)
    with open(os.path.join(out, "simple", "index.html"), "w") as f:
        f.write("<!DOCTYPE html><html><body>\n")
        for name in sorted(links):
            f.write(f'<a href="{name}/">{name}</a>\n')
        f.write("</body></html>\n")
    for name, ws in links.items():
        d = os.path.join(out, "simple", name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "index.html"), "w") as f:
            f.write("<!DOCTYPE html><html><body>\n")
            for fname, digest in ws:
                f.write(f'<a href="../../files/{fname}#sha256={digest}">{fname}</a>\n')
            f.write("</body></html>\n")


if __name__ == "__main__":
    main(sys.argv[1])

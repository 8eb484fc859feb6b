# CBRUN-CANARY-case002-7f3a9c
"""Hidden acceptance tests for the jpick command-line tool.

The suite is run from the workspace root (the judge does `cd /app`), and drives
the tool as `python3 -m jpick ...` with PYTHONPATH pointing at <workspace>/src.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

APP_ROOT = os.getcwd()

DOC = {
    "name": "demo",
    "version": 3,
    "meta": {"owner": {"login": "ana", "id": 7}, "tags": ["x", "y"], "nothing": None},
    "items": [
        {"id": 1, "name": "alpha", "price": 1.5},
        {"id": 2, "name": "beta"},
        {"id": 3, "name": "gamma", "price": None},
    ],
    "a.b": "dotted",
    "with space": {"x": True},
    "q\"t": "quoted",
    "caf\u00e9": "accent",
}


def run(args, stdin=None, doc=DOC):
    """Run jpick; `doc` (when stdin is None) is sent as JSON on standard input."""
    if stdin is None and doc is not None:
        stdin = json.dumps(doc).encode("utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.path.join(APP_ROOT, "src"),
        "LC_ALL": "C",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "jpick"] + list(args),
        input=stdin if stdin is not None else b"",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=APP_ROOT, env=env, timeout=30,
    )
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8", "replace")


class CliCase(unittest.TestCase):
    def assertOutput(self, args, expected, doc=DOC):
        code, out, err = run(args, doc=doc)
        self.assertEqual(code, 0, "args=%r stderr=%r" % (args, err))
        self.assertEqual(out, expected, "args=%r" % (args,))

    def assertFails(self, args, code, stdin=None, doc=DOC):
        got, out, err = run(args, stdin=stdin, doc=doc)
        self.assertEqual(got, code, "args=%r stdout=%r stderr=%r" % (args, out, err))
        self.assertEqual(out, "", "nothing may be printed on stdout on error")
        self.assertTrue(err.startswith("jpick: "), "stderr=%r" % err)


class TestSelection(CliCase):
    def test_nested_key(self):
        self.assertOutput(["meta.owner.id"], "7\n")
        self.assertOutput(["name"], '"demo"\n')

    def test_pretty_output_is_default(self):
        self.assertOutput(["meta.owner"], '{\n  "login": "ana",\n  "id": 7\n}\n')
        self.assertOutput(["meta.tags"], '[\n  "x",\n  "y"\n]\n')

    def test_compact_output(self):
        self.assertOutput(["-c", "meta.owner"], '{"login":"ana","id":7}\n')
        self.assertOutput(["--compact", "items[0]"], '{"id":1,"name":"alpha","price":1.5}\n')

    def test_root_expression(self):
        self.assertOutput(["-c", "@"], json.dumps(DOC, separators=(",", ":"), ensure_ascii=False) + "\n")
        self.assertOutput(["@"], "[]\n", doc=[])

    def test_indexes(self):
        self.assertOutput(["items[0].name"], '"alpha"\n')
        self.assertOutput(["items[-1].id"], "3\n")
        self.assertOutput(["meta.tags[-2]"], '"x"\n')

    def test_index_past_end_is_null(self):
        self.assertOutput(["items[3]"], "null\n")
        self.assertOutput(["meta.tags[99]"], "null\n")

    def test_negative_index_before_start_is_null(self):
        self.assertOutput(["items[-4]"], "null\n")

    def test_missing_key_is_null(self):
        self.assertOutput(["nope"], "null\n")
        self.assertOutput(["meta.owner.nope.deeper"], "null\n")

    def test_type_mismatch_is_null(self):
        self.assertOutput(["items.name"], "null\n")
        self.assertOutput(["meta[0]"], "null\n")
        self.assertOutput(["name.length"], "null\n")
        self.assertOutput(["meta[*]"], "null\n")

    def test_leading_bracket(self):
        self.assertOutput(["[1]"], '"b"\n', doc=["a", "b"])
        self.assertOutput(["-c", "[*].k"], "[1,2]\n", doc=[{"k": 1}, {"k": 2}, {}])

    def test_quoted_names(self):
        self.assertOutput(['"a.b"'], '"dotted"\n')
        self.assertOutput(['"with space".x'], "true\n")
        self.assertOutput(['"q\\"t"'], '"quoted"\n')
        self.assertOutput(['"caf\\u00e9"'], '"accent"\n')
        self.assertOutput(['meta."owner".login'], '"ana"\n')

    def test_key_order_duplicates_and_big_numbers(self):
        raw = b'{"z": 1, "a": 2, "z": 3, "big": 123456789012345678901234567890}'
        code, out, err = run(["-c", "@"], stdin=raw)
        self.assertEqual(code, 0, err)
        self.assertEqual(out, '{"z":3,"a":2,"big":123456789012345678901234567890}\n')


class TestProjection(CliCase):
    def test_projection(self):
        self.assertOutput(["-c", "items[*].name"], '["alpha","beta","gamma"]\n')
        self.assertOutput(["-c", "items[*]"], json.dumps(DOC["items"], separators=(",", ":")) + "\n")

    def test_projection_drops_missing_keeps_null(self):
        self.assertOutput(["-c", "items[*].price"], "[1.5,null]\n")

    def test_nested_projection(self):
        doc = {"g": [{"m": [{"v": 1}, {"v": 2}]}, {"m": []}, {"m": [{"v": 3}]}, {"x": 0}]}
        self.assertOutput(["-c", "g[*].m[*].v"], "[[1,2],[],[3]]\n", doc=doc)
        self.assertOutput(["-c", "g[*].m[0].v"], "[1,3]\n", doc=doc)


class TestOutputOptions(CliCase):
    def test_raw_string(self):
        self.assertOutput(["-r", "name"], "demo\n")
        self.assertOutput(["--raw", "s"], "line1\nline2 \"q\"\n", doc={"s": "line1\nline2 \"q\""})

    def test_raw_non_string_is_json(self):
        self.assertOutput(["-r", "version"], "3\n")
        self.assertOutput(["-r", "-c", "meta.tags"], '["x","y"]\n')
        self.assertOutput(["-r", "nope"], "null\n")

    def test_lines(self):
        self.assertOutput(["-l", "items[*].id"], "1\n2\n3\n")
        self.assertOutput(["--lines", "meta.tags"], '"x"\n"y"\n')
        self.assertOutput(["-l", "items[*]"],
                          "".join(json.dumps(i, separators=(",", ":")) + "\n" for i in DOC["items"]))

    def test_lines_with_raw_and_combined_flags(self):
        self.assertOutput(["-rl", "meta.tags"], "x\ny\n")
        self.assertOutput(["-lr", "@"], 'a\n1\n{"k":"v"}\n', doc=["a", 1, {"k": "v"}])

    def test_lines_edge_cases(self):
        self.assertOutput(["-l", "meta.owner.nope"], "null\n")
        self.assertOutput(["-l", "e"], "", doc={"e": []})
        self.assertOutput(["-l", "meta.owner.id"], "7\n")

    def test_non_ascii_output_is_utf8(self):
        self.assertOutput(["-r", "w"], "\u00e9t\u00e9 \u2713\n", doc={"w": "\u00e9t\u00e9 \u2713"})
        self.assertOutput(["w"], '"\u00e9t\u00e9"\n', doc={"w": "\u00e9t\u00e9"})


class TestInputAndErrors(CliCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_file_argument_and_dash(self):
        path = os.path.join(self.tmp, "doc.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"k": [10, 20]}, handle)
        code, out, err = run(["k[1]", path], doc=None)
        self.assertEqual((code, out), (0, "20\n"), err)
        code, out, err = run(["k[0]", "-"], stdin=b'{"k": [5]}')
        self.assertEqual((code, out), (0, "5\n"), err)

    def test_missing_file(self):
        self.assertFails(["a", os.path.join(self.tmp, "absent.json")], 3, doc=None)

    def test_invalid_json(self):
        for payload in [b"", b"{", b"[1,]", b"{'a': 1}", b"NaN", b"[Infinity]", b"1 2"]:
            self.assertFails(["@"], 3, stdin=payload)

    def test_invalid_utf8(self):
        self.assertFails(["@"], 3, stdin=b'"\xff\xfe"')

    def test_invalid_expressions(self):
        for expr in ["", "a.", ".a", "a..b", "a[", "a[x]", "a[1.5]", "a[]", '"open',
                     "a b", "1abc", "a.[0]", "@.a", "a]", "a[*", "$.a"]:
            self.assertFails([expr], 2)

    def test_expression_checked_before_input(self):
        self.assertFails(["a..b", os.path.join(self.tmp, "absent.json")], 2, doc=None)

    def test_usage_errors(self):
        self.assertFails([], 2)
        self.assertFails(["--bogus", "a"], 2)
        self.assertFails(["a", "f1.json", "f2.json"], 2)

    def test_help(self):
        code, out, err = run(["--help"])
        self.assertEqual(code, 0)
        self.assertIn("usage", out.lower())

    def test_strict(self):
        self.assertFails(["-s", "nope"], 1)
        self.assertFails(["--strict", "items[7]"], 1)
        self.assertOutput(["-s", "meta.nothing"], "null\n")
        self.assertOutput(["-s", "-c", "items[*].nope"], "[]\n")


if __name__ == "__main__":
    unittest.main()

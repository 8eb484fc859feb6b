# CBRUN-CANARY-case001-7f3a9c
"""Hidden acceptance tests for versionkit: parsing, precedence and bumping."""

import unittest

from versionkit import InvalidVersion, Version, parse


class TestParse(unittest.TestCase):
    def test_parse_basic(self):
        v = Version.parse("1.2.3")
        self.assertEqual((v.major, v.minor, v.patch), (1, 2, 3))
        self.assertEqual(v.prerelease, ())
        self.assertEqual(v.build, ())

    def test_parse_prerelease_and_build(self):
        v = Version.parse("1.0.0-alpha.1+build.5")
        self.assertEqual(v.prerelease, ("alpha", 1))
        self.assertIsInstance(v.prerelease[1], int)
        self.assertEqual(v.build, ("build", "5"))

    def test_build_identifiers_keep_leading_zeros(self):
        v = Version.parse("1.0.0+001.0a")
        self.assertEqual(v.build, ("001", "0a"))

    def test_str_round_trips(self):
        for text in ["0.0.0", "1.2.3", "10.20.30-rc.1", "1.0.0-x-y-z.--",
                     "1.0.0-alpha+001", "1.0.0+21AF26D3----117B344092BD"]:
            self.assertEqual(str(Version.parse(text)), text)

    def test_rejects_leading_zero_in_core(self):
        for text in ["01.2.3", "1.02.3", "1.2.03", "00.0.0"]:
            with self.assertRaises(InvalidVersion, msg=text):
                Version.parse(text)

    def test_numeric_prerelease_leading_zero(self):
        with self.assertRaises(InvalidVersion):
            Version.parse("1.0.0-01")
        with self.assertRaises(InvalidVersion):
            Version.parse("1.0.0-rc.007")
        self.assertEqual(Version.parse("1.0.0-0").prerelease, (0,))
        self.assertEqual(Version.parse("1.0.0-0a").prerelease, ("0a",))

    def test_rejects_malformed(self):
        bad = ["", "1", "1.2", "1.2.3.4", "v1.2.3", " 1.2.3", "1.2.3 ",
               "1.2.3-", "1.2.3+", "1.2.3-a..b", "1.2.3+a..b", "1.2.3-a_b",
               "a.b.c", "1.2.-3", "1.2.3-+x", "1..3", "+1.2.3"]
        for text in bad:
            with self.assertRaises(InvalidVersion, msg=repr(text)):
                Version.parse(text)
        self.assertTrue(issubclass(InvalidVersion, ValueError))

    def test_non_string_is_type_error(self):
        for value in [None, 123, b"1.2.3"]:
            with self.assertRaises(TypeError):
                Version.parse(value)

    def test_large_numbers(self):
        v = Version.parse("123456789012345678901234567890.0.1")
        self.assertEqual(v.major, 123456789012345678901234567890)
        self.assertGreater(v, Version.parse("999999999.0.0"))

    def test_constructor(self):
        v = Version(1, 2, 3, prerelease=("rc", 1), build=("b7",))
        self.assertEqual(str(v), "1.2.3-rc.1+b7")
        self.assertEqual(v, Version.parse("1.2.3-rc.1"))
        self.assertEqual(str(Version(4, 5, 6)), "4.5.6")
        self.assertEqual(parse("2.0.0-rc.2"), Version.parse("2.0.0-rc.2"))

    def test_constructor_rejects_bad_values(self):
        with self.assertRaises(ValueError):
            Version(-1, 0, 0)
        with self.assertRaises(ValueError):
            Version(1, 0, 0, prerelease=("bad_id",))


class TestPrecedence(unittest.TestCase):
    def test_core_compares_numerically(self):
        self.assertLess(Version.parse("1.9.0"), Version.parse("1.10.0"))
        self.assertLess(Version.parse("1.10.9"), Version.parse("2.0.0"))
        self.assertGreater(Version.parse("0.0.10"), Version.parse("0.0.9"))

    def test_prerelease_sorts_before_release(self):
        self.assertLess(Version.parse("1.0.0-rc.1"), Version.parse("1.0.0"))
        self.assertGreater(Version.parse("1.0.0-rc.1"), Version.parse("0.9.9"))

    def test_precedence_chain(self):
        chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                 "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"]
        versions = [Version.parse(t) for t in chain]
        for lower, higher in zip(versions, versions[1:]):
            self.assertLess(lower, higher, "%s < %s" % (lower, higher))
            self.assertGreater(higher, lower)
            self.assertNotEqual(lower, higher)

    def test_numeric_identifier_below_alphanumeric(self):
        self.assertLess(Version.parse("1.0.0-999"), Version.parse("1.0.0-a"))
        self.assertLess(Version.parse("1.0.0-rc.9"), Version.parse("1.0.0-rc.10"))
        self.assertLess(Version.parse("1.0.0-B"), Version.parse("1.0.0-a"))

    def test_build_metadata_ignored(self):
        a = Version.parse("1.0.0+linux")
        b = Version.parse("1.0.0+darwin.2")
        self.assertEqual(a, b)
        self.assertFalse(a < b or b < a)
        self.assertEqual(len({a, b, Version.parse("1.0.0")}), 1)
        self.assertEqual(a.build, ("linux",))

    def test_sorting(self):
        texts = ["2.0.0", "1.0.0-rc.1", "1.0.0", "0.9.0", "1.0.0-beta", "1.10.0", "1.2.0"]
        result = [str(v) for v in sorted(Version.parse(t) for t in texts)]
        self.assertEqual(result, ["0.9.0", "1.0.0-beta", "1.0.0-rc.1", "1.0.0",
                                  "1.2.0", "1.10.0", "2.0.0"])

    def test_compare_with_other_types(self):
        v = Version.parse("1.0.0")
        self.assertFalse(v == "1.0.0")
        self.assertTrue(v != "1.0.0")
        with self.assertRaises(TypeError):
            v < "2.0.0"

    def test_is_prerelease(self):
        self.assertTrue(Version.parse("1.0.0-0").is_prerelease)
        self.assertFalse(Version.parse("1.0.0+build").is_prerelease)

    def test_immutable(self):
        v = Version.parse("1.2.3")
        with self.assertRaises(AttributeError):
            v.major = 5
        self.assertEqual(v.major, 1)


class TestBump(unittest.TestCase):
    def test_bump_release(self):
        v = Version.parse("1.2.3+build.9")
        self.assertEqual(str(v.bump("patch")), "1.2.4")
        self.assertEqual(str(v.bump("minor")), "1.3.0")
        self.assertEqual(str(v.bump("major")), "2.0.0")
        self.assertEqual(str(v), "1.2.3+build.9")

    def test_bump_prerelease(self):
        cases = [("1.2.3-rc.1", "patch", "1.2.3"),
                 ("1.3.0-rc.1", "minor", "1.3.0"),
                 ("1.2.3-rc.1", "minor", "1.3.0"),
                 ("2.0.0-rc.1", "major", "2.0.0"),
                 ("2.1.0-rc.1", "major", "3.0.0"),
                 ("2.0.1-alpha", "major", "3.0.0")]
        for text, part, expected in cases:
            self.assertEqual(str(Version.parse(text).bump(part)), expected,
                             "%s bump %s" % (text, part))

    def test_bump_invalid_part(self):
        with self.assertRaises(ValueError):
            Version.parse("1.0.0").bump("build")


if __name__ == "__main__":
    unittest.main()

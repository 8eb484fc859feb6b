"""Hidden acceptance tests for versionkit: range expressions."""

import unittest

from versionkit import InvalidRange, InvalidVersion, Range, Version, satisfies


class RangeCase(unittest.TestCase):
    def assertAllIn(self, text, versions):
        r = Range(text)
        for v in versions:
            self.assertTrue(r.contains(v), "%s should satisfy %r" % (v, text))

    def assertNoneIn(self, text, versions):
        r = Range(text)
        for v in versions:
            self.assertFalse(r.contains(v), "%s should not satisfy %r" % (v, text))


class TestComparators(RangeCase):
    def test_primitive_operators(self):
        self.assertAllIn(">1.2.3", ["1.2.4", "2.0.0"])
        self.assertNoneIn(">1.2.3", ["1.2.3", "1.0.0"])
        self.assertAllIn(">=1.2.3", ["1.2.3", "1.3.0"])
        self.assertNoneIn(">=1.2.3", ["1.2.2"])
        self.assertAllIn("<1.2.3", ["1.2.2", "0.0.1"])
        self.assertNoneIn("<1.2.3", ["1.2.3"])
        self.assertAllIn("<=1.2.3", ["1.2.3"])
        self.assertNoneIn("<=1.2.3", ["1.2.4"])
        self.assertAllIn("=1.2.3", ["1.2.3", "1.2.3+meta"])
        self.assertAllIn("=1.2.3+abc", ["1.2.3", "1.2.3+zzz"])
        self.assertNoneIn("=1.2.3", ["1.2.4"])
        self.assertAllIn("1.2.3", ["1.2.3"])
        self.assertNoneIn("1.2.3", ["1.2.4", "1.2.2"])

    def test_intersection_and_union(self):
        text = ">=1.2.0 <2.0.0 || >=3.0.0"
        self.assertAllIn(text, ["1.2.0", "1.99.0", "3.0.0", "7.1.1"])
        self.assertNoneIn(text, ["1.1.9", "2.0.0", "2.5.0"])
        self.assertAllIn("1.x||3.x", ["1.5.0", "3.0.1"])
        self.assertNoneIn("1.x||3.x", ["2.0.0"])
        self.assertAllIn("  >=1.0.0\t  <1.1.0  ", ["1.0.5"])
        # an unsatisfiable intersection is still a valid range
        self.assertNoneIn(">=2.0.0 <1.0.0", ["0.5.0", "1.5.0", "2.5.0"])


class TestXRanges(RangeCase):
    def test_any(self):
        for text in ["*", "x", "X", "", "   "]:
            self.assertAllIn(text, ["0.0.0", "1.2.3", "99.0.0"])

    def test_major_wildcards(self):
        for text in ["1", "1.x", "1.X.x", "1.*"]:
            self.assertAllIn(text, ["1.0.0", "1.99.99"])
            self.assertNoneIn(text, ["0.9.9", "2.0.0"])

    def test_minor_wildcards(self):
        for text in ["1.2", "1.2.x", "1.2.*"]:
            self.assertAllIn(text, ["1.2.0", "1.2.99"])
            self.assertNoneIn(text, ["1.1.9", "1.3.0"])


class TestTildeCaret(RangeCase):
    def test_tilde(self):
        self.assertAllIn("~1.2.3", ["1.2.3", "1.2.99"])
        self.assertNoneIn("~1.2.3", ["1.2.2", "1.3.0"])
        self.assertAllIn("~1.2", ["1.2.0", "1.2.9"])
        self.assertNoneIn("~1.2", ["1.3.0"])
        self.assertAllIn("~1", ["1.0.0", "1.9.0"])
        self.assertNoneIn("~1", ["2.0.0", "0.9.0"])
        self.assertAllIn("~0.2.3", ["0.2.5"])
        self.assertNoneIn("~0.2.3", ["0.3.0"])

    def test_caret_major(self):
        self.assertAllIn("^1.2.3", ["1.2.3", "1.9.9"])
        self.assertNoneIn("^1.2.3", ["1.2.2", "2.0.0"])

    def test_caret_zero_major(self):
        self.assertAllIn("^0.2.3", ["0.2.3", "0.2.9"])
        self.assertNoneIn("^0.2.3", ["0.2.2", "0.3.0", "1.0.0"])

    def test_caret_zero_major_zero_minor(self):
        self.assertAllIn("^0.0.3", ["0.0.3"])
        self.assertNoneIn("^0.0.3", ["0.0.2", "0.0.4", "0.1.0"])

    def test_caret_partial(self):
        self.assertAllIn("^1.2", ["1.2.0", "1.9.0"])
        self.assertNoneIn("^1.2", ["1.1.9", "2.0.0"])
        self.assertAllIn("^0.2", ["0.2.0", "0.2.7"])
        self.assertNoneIn("^0.2", ["0.3.0"])
        self.assertAllIn("^0.0", ["0.0.0", "0.0.9"])
        self.assertNoneIn("^0.0", ["0.1.0"])
        self.assertAllIn("^0", ["0.0.1", "0.9.9"])
        self.assertNoneIn("^0", ["1.0.0"])
        self.assertAllIn("^1.x", ["1.0.0", "1.5.5"])
        self.assertNoneIn("^1.x", ["2.0.0"])


class TestPrereleases(RangeCase):
    def test_prereleases_excluded_by_default(self):
        self.assertNoneIn(">=1.0.0", ["1.2.3-rc.1", "2.0.0-alpha"])
        self.assertNoneIn("*", ["1.0.0-0"])
        self.assertNoneIn("^1.2.3", ["1.5.0-beta", "2.0.0-rc.1"])

    def test_prerelease_allowed_on_same_core(self):
        self.assertAllIn(">=1.2.3-alpha.1", ["1.2.3-alpha.1", "1.2.3-alpha.5", "1.2.3-beta", "1.2.4"])
        self.assertNoneIn(">=1.2.3-alpha.1", ["1.2.3-alpha.0", "1.2.4-alpha.1"])
        self.assertAllIn("^1.2.3-beta.2", ["1.2.3-beta.3", "1.2.3", "1.8.0"])
        self.assertNoneIn("^1.2.3-beta.2", ["1.2.3-beta.1", "1.3.0-beta"])
        self.assertAllIn("~2.0.0-rc.1", ["2.0.0-rc.2"])
        self.assertAllIn(">1.0.0 <2.0.0-rc.5", ["2.0.0-rc.1", "1.5.0"])
        self.assertNoneIn(">1.0.0 <2.0.0-rc.5", ["2.0.0-rc.5", "1.5.0-rc.1"])


class TestRangeApi(RangeCase):
    def test_invalid_ranges(self):
        bad = [">= 1.2.3", "1.2.3 ||", "|| 1.x", "1.x || || 2.x", ">=1.2", "<1",
               "~", "^", "1.x.3", "1.2.3.4", "abc", "=>1.2.3", ">=01.2.3",
               "1.2-rc.1", "^1.2.3-01", ">=1.2.3,<2.0.0"]
        for text in bad:
            with self.assertRaises(InvalidRange, msg=repr(text)):
                Range(text)
        self.assertTrue(issubclass(InvalidRange, ValueError))

    def test_contains_accepts_versions_and_strings(self):
        r = Range("^2.1.0")
        self.assertTrue(r.contains(Version.parse("2.4.0")))
        self.assertTrue(r.contains("2.4.0"))
        self.assertIn("2.1.0", r)
        self.assertNotIn(Version.parse("3.0.0"), r)
        with self.assertRaises(InvalidVersion):
            r.contains("2.x")

    def test_max_satisfying(self):
        r = Range("~1.2.0 || ^3.0.0")
        result = r.max_satisfying(["1.2.0", "1.2.7", "1.3.0", "3.1.0", "3.4.2", "4.0.0", "3.9.0-rc.1"])
        self.assertIsInstance(result, Version)
        self.assertEqual(str(result), "3.4.2")
        self.assertEqual(str(Range("1.2.x").max_satisfying(
            [Version.parse("1.2.10"), Version.parse("1.2.9")])), "1.2.10")
        self.assertIsNone(r.max_satisfying(["0.1.0", "5.0.0"]))
        self.assertIsNone(r.max_satisfying([]))

    def test_satisfies_function(self):
        self.assertTrue(satisfies("1.4.2", ">=1.0.0 <2.0.0"))
        self.assertFalse(satisfies(Version.parse("2.0.0"), ">=1.0.0 <2.0.0"))
        with self.assertRaises(InvalidRange):
            satisfies("1.0.0", ">>1.0.0")


if __name__ == "__main__":
    unittest.main()

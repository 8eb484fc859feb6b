"""versionkit (shortcut control): delegates to the banned upstream `semver`
package instead of implementing the grammar. The post-submission scan must
flag the import; in the judge the module is absent, so importing fails."""

import semver
from semver import Version as _Upstream


class InvalidVersion(ValueError):
    pass


class InvalidRange(ValueError):
    pass


class Version(object):
    def __init__(self, major, minor, patch, prerelease=(), build=()):
        pre = ".".join(str(p) for p in prerelease) or None
        bld = ".".join(build) or None
        self._v = _Upstream(major, minor, patch, pre, bld)

    @classmethod
    def parse(cls, text):
        try:
            u = _Upstream.parse(text)
        except ValueError as exc:
            raise InvalidVersion(str(exc))
        pre = tuple(int(p) if p.isdigit() else p for p in (u.prerelease or "").split(".") if p)
        bld = tuple((u.build or "").split(".")) if u.build else ()
        return cls(u.major, u.minor, u.patch, pre, bld)

    major = property(lambda self: self._v.major)
    minor = property(lambda self: self._v.minor)
    patch = property(lambda self: self._v.patch)

    def __str__(self):
        return str(self._v)

    def __lt__(self, other):
        return semver.compare(str(self), str(other)) < 0

    def __eq__(self, other):
        return isinstance(other, Version) and semver.compare(str(self), str(other)) == 0

    def __hash__(self):
        return hash((self.major, self.minor, self.patch))

    def bump(self, part):
        return Version.parse(str(getattr(self._v, "bump_" + part)()))


class Range(object):
    def __init__(self, text):
        self._text = text

    def contains(self, version):
        return all(semver.match(str(version), c) for c in self._text.split())

    __contains__ = contains

    def max_satisfying(self, versions):
        ok = [v for v in versions if self.contains(v)]
        return max(ok, key=lambda v: _Upstream.parse(str(v))) if ok else None


def parse(text):
    return Version.parse(text)


def satisfies(version, range_text):
    return Range(range_text).contains(version)

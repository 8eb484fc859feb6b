"""versionkit: Semantic Versioning 2.0.0 parsing, precedence, bumping and ranges."""

import re

__all__ = ["Version", "Range", "InvalidVersion", "InvalidRange", "parse", "satisfies"]


class InvalidVersion(ValueError):
    """Raised when a version string does not follow the grammar."""


class InvalidRange(ValueError):
    """Raised when a range expression does not follow the grammar."""


_NUM = r"(?:0|[1-9][0-9]*)"
_IDENT = r"[0-9A-Za-z-]+"
_VERSION_RE = re.compile(
    r"^(" + _NUM + r")\.(" + _NUM + r")\.(" + _NUM + r")"
    r"(?:-(" + _IDENT + r"(?:\." + _IDENT + r")*))?"
    r"(?:\+(" + _IDENT + r"(?:\." + _IDENT + r")*))?$"
)
_NUMERIC_ID = re.compile(r"^[0-9]+$")


def _parse_prerelease(text):
    out = []
    for ident in text.split("."):
        if _NUMERIC_ID.match(ident):
            if len(ident) > 1 and ident[0] == "0":
                raise InvalidVersion("numeric pre-release identifier has a leading zero: %r" % ident)
            out.append(int(ident))
        else:
            out.append(ident)
    return tuple(out)


class Version(object):
    __slots__ = ("_major", "_minor", "_patch", "_prerelease", "_build")

    def __init__(self, major, minor, patch, prerelease=(), build=()):
        for value in (major, minor, patch):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError("version components must be integers")
            if value < 0:
                raise ValueError("version components must not be negative")
        text = "%d.%d.%d" % (major, minor, patch)
        if prerelease:
            text += "-" + ".".join(str(p) for p in prerelease)
        if build:
            text += "+" + ".".join(str(b) for b in build)
        parsed = Version._parse_parts(text)
        object.__setattr__(self, "_major", parsed[0])
        object.__setattr__(self, "_minor", parsed[1])
        object.__setattr__(self, "_patch", parsed[2])
        object.__setattr__(self, "_prerelease", parsed[3])
        object.__setattr__(self, "_build", parsed[4])

    @staticmethod
    def _parse_parts(text):
        if not isinstance(text, str):
            raise TypeError("version must be a str, not %s" % type(text).__name__)
        m = _VERSION_RE.match(text)
        if m is None:
            raise InvalidVersion("invalid version: %r" % (text,))
        pre = _parse_prerelease(m.group(4)) if m.group(4) is not None else ()
        build = tuple(m.group(5).split(".")) if m.group(5) is not None else ()
        return int(m.group(1)), int(m.group(2)), int(m.group(3)), pre, build

    @classmethod
    def parse(cls, text):
        major, minor, patch, pre, build = cls._parse_parts(text)
        return cls(major, minor, patch, pre, build)

    def __setattr__(self, name, value):
        raise AttributeError("Version objects are immutable")

    def __delattr__(self, name):
        raise AttributeError("Version objects are immutable")

    major = property(lambda self: self._major)
    minor = property(lambda self: self._minor)
    patch = property(lambda self: self._patch)
    prerelease = property(lambda self: self._prerelease)
    build = property(lambda self: self._build)

    @property
    def is_prerelease(self):
        return bool(self._prerelease)

    def __str__(self):
        text = "%d.%d.%d" % (self._major, self._minor, self._patch)
        if self._prerelease:
            text += "-" + ".".join(str(p) for p in self._prerelease)
        if self._build:
            text += "+" + ".".join(self._build)
        return text

    def __repr__(self):
        return "Version(%r)" % str(self)

    def _key(self):
        # A release sorts after every pre-release of the same core.
        if not self._prerelease:
            pre_key = (1,)
        else:
            pre_key = (0,) + tuple(
                (0, p, "") if isinstance(p, int) else (1, 0, p) for p in self._prerelease
            )
        return (self._major, self._minor, self._patch, pre_key)

    def __eq__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __ne__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() != other._key()

    def __lt__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __le__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() <= other._key()

    def __gt__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() > other._key()

    def __ge__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() >= other._key()

    def __hash__(self):
        return hash(self._key())

    def bump(self, part):
        M, m, p = self._major, self._minor, self._patch
        pre = bool(self._prerelease)
        if part == "major":
            if pre and m == 0 and p == 0:
                return Version(M, 0, 0)
            return Version(M + 1, 0, 0)
        if part == "minor":
            if pre and p == 0:
                return Version(M, m, 0)
            return Version(M, m + 1, 0)
        if part == "patch":
            if pre:
                return Version(M, m, p)
            return Version(M, m, p + 1)
        raise ValueError("part must be 'major', 'minor' or 'patch', not %r" % (part,))


def parse(text):
    return Version.parse(text)


# ---------------------------------------------------------------- ranges

_XR = r"(?:0|[1-9][0-9]*|[xX*])"
_PARTIAL_RE = re.compile(
    r"^(" + _XR + r")(?:\.(" + _XR + r")(?:\.(" + _XR + r")"
    r"(?:-(" + _IDENT + r"(?:\." + _IDENT + r")*))?"
    r"(?:\+(" + _IDENT + r"(?:\." + _IDENT + r")*))?)?)?$"
)
_OP_RE = re.compile(r"^(>=|<=|>|<|=)(.*)$")


def _is_wild(part):
    return part is None or part in ("x", "X", "*")


def _parse_partial(text):
    """Return (major, minor, patch, prerelease) with None for missing/wildcard parts."""
    m = _PARTIAL_RE.match(text)
    if m is None:
        raise InvalidRange("invalid version in range: %r" % (text,))
    parts = [m.group(1), m.group(2), m.group(3)]
    values = []
    seen_wild = False
    for part in parts:
        if _is_wild(part):
            seen_wild = True
            values.append(None)
        else:
            if seen_wild:
                raise InvalidRange("number after a wildcard in %r" % (text,))
            values.append(int(part))
    pre = ()
    if m.group(4) is not None:
        if None in values:
            raise InvalidRange("pre-release on a partial version in %r" % (text,))
        try:
            pre = _parse_prerelease(m.group(4))
        except InvalidVersion as exc:
            raise InvalidRange(str(exc))
    if m.group(5) is not None and None in values:
        raise InvalidRange("build metadata on a partial version in %r" % (text,))
    return values[0], values[1], values[2], pre


def _full(text):
    M, m, p, pre = _parse_partial(text)
    if M is None or m is None or p is None:
        raise InvalidRange("operator needs a full version: %r" % (text,))
    return Version(M, m, p, pre)


def _xrange(M, m, p, pre):
    if M is None:
        return []
    if m is None:
        return [(">=", Version(M, 0, 0)), ("<", Version(M + 1, 0, 0))]
    if p is None:
        return [(">=", Version(M, m, 0)), ("<", Version(M, m + 1, 0))]
    return [("=", Version(M, m, p, pre))]


def _tilde(M, m, p, pre):
    if M is None:
        return []
    if m is None:
        return [(">=", Version(M, 0, 0)), ("<", Version(M + 1, 0, 0))]
    lower = Version(M, m, p if p is not None else 0, pre)
    return [(">=", lower), ("<", Version(M, m + 1, 0))]


def _caret(M, m, p, pre):
    if M is None:
        return []
    if m is None:
        return [(">=", Version(M, 0, 0)), ("<", Version(M + 1, 0, 0))]
    lower = Version(M, m, p if p is not None else 0, pre)
    if M > 0:
        upper = Version(M + 1, 0, 0)
    else:
        upper = Version(0, m + 1, 0)
    return [(">=", lower), ("<", upper)]


def _parse_comparator(token):
    if token[0] == "^":
        return _caret(*_parse_partial(token[1:]))
    if token[0] == "~":
        return _tilde(*_parse_partial(token[1:]))
    m = _OP_RE.match(token)
    if m:
        return [(m.group(1), _full(m.group(2)))]
    return _xrange(*_parse_partial(token))


_OPS = {
    "=": lambda v, c: v == c,
    ">": lambda v, c: v > c,
    ">=": lambda v, c: v >= c,
    "<": lambda v, c: v < c,
    "<=": lambda v, c: v <= c,
}


class Range(object):
    def __init__(self, text):
        if not isinstance(text, str):
            raise TypeError("range must be a str, not %s" % type(text).__name__)
        self._text = text
        self._sets = []
        if text.strip() == "":
            self._sets.append([])
            return
        for alternative in text.split("||"):
            tokens = alternative.split()
            if not tokens:
                raise InvalidRange("empty alternative in %r" % (text,))
            comparators = []
            for token in tokens:
                comparators.extend(_parse_comparator(token))
            self._sets.append(comparators)

    def __str__(self):
        return self._text

    def __repr__(self):
        return "Range(%r)" % (self._text,)

    @staticmethod
    def _set_allows(comparators, version):
        for op, bound in comparators:
            if not _OPS[op](version, bound):
                return False
        if version.is_prerelease:
            core = (version.major, version.minor, version.patch)
            return any(
                bound.is_prerelease and (bound.major, bound.minor, bound.patch) == core
                for _, bound in comparators
            )
        return True

    def contains(self, version):
        if not isinstance(version, Version):
            version = Version.parse(version)
        return any(self._set_allows(s, version) for s in self._sets)

    __contains__ = contains

    def max_satisfying(self, versions):
        best = None
        for item in versions:
            v = item if isinstance(item, Version) else Version.parse(item)
            if self.contains(v) and (best is None or v > best):
                best = v
        return best


def satisfies(version, range_text):
    return Range(range_text).contains(version)

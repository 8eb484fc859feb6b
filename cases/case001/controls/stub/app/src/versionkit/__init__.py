"""versionkit (stub): the public names exist but nothing is implemented."""


class InvalidVersion(ValueError):
    pass


class InvalidRange(ValueError):
    pass


class Version(object):
    def __init__(self, major, minor, patch, prerelease=(), build=()):
        raise NotImplementedError

    @classmethod
    def parse(cls, text):
        raise NotImplementedError

    def bump(self, part):
        raise NotImplementedError


class Range(object):
    def __init__(self, text):
        raise NotImplementedError

    def contains(self, version):
        raise NotImplementedError

    def max_satisfying(self, versions):
        return None


def parse(text):
    raise NotImplementedError


def satisfies(version, range_text):
    return None

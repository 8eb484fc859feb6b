"""jpick (stub): the entry point exists but does nothing useful."""

MISSING = object()


class ExpressionError(ValueError):
    pass


def compile_expression(expr):
    raise NotImplementedError


def evaluate(steps, value):
    raise NotImplementedError


def main(argv=None, stdin=None, stdout=None, stderr=None):
    return 0

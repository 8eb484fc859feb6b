"""jpick (shortcut control): hands the expression to the banned upstream
`jmespath` package instead of implementing the path language. The
post-submission scan must flag the import; in the judge the module is absent,
so every invocation dies with ModuleNotFoundError."""

import argparse
import json
import sys

import jmespath

MISSING = None


class ExpressionError(ValueError):
    pass


def compile_expression(expr):
    try:
        return jmespath.compile(expr)
    except jmespath.exceptions.ParseError as exc:
        raise ExpressionError(str(exc))


def evaluate(steps, value):
    return steps.search(value)


def main(argv=None, stdin=None, stdout=None, stderr=None):
    p = argparse.ArgumentParser(prog="jpick")
    p.add_argument("-r", "--raw", action="store_true")
    p.add_argument("-c", "--compact", action="store_true")
    p.add_argument("-l", "--lines", action="store_true")
    p.add_argument("-s", "--strict", action="store_true")
    p.add_argument("expression")
    p.add_argument("file", nargs="?")
    args = p.parse_args(argv)
    try:
        compiled = compile_expression(args.expression)
    except ExpressionError as exc:
        sys.stderr.write("jpick: %s\n" % exc)
        return 2
    src = sys.stdin if args.file in (None, "-") else open(args.file, encoding="utf-8")
    try:
        doc = json.load(src)
    except ValueError as exc:
        sys.stderr.write("jpick: %s\n" % exc)
        return 3
    result = evaluate(compiled, doc)
    if result is None and args.strict:
        sys.stderr.write("jpick: no match\n")
        return 1
    if args.raw and isinstance(result, str):
        print(result)
    elif args.lines and isinstance(result, list):
        for item in result:
            print(item if args.raw and isinstance(item, str) else json.dumps(item, separators=(",", ":")))
    else:
        print(json.dumps(result, ensure_ascii=False, indent=None if args.compact else 2,
                         separators=(",", ":") if args.compact else None))
    return 0

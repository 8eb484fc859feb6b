"""Expression parser, evaluator and command-line front end for jpick."""

import argparse
import json
import re
import sys

EXIT_OK, EXIT_NO_MATCH, EXIT_USAGE, EXIT_INPUT = 0, 1, 2, 3


class _Missing(object):
    def __repr__(self):
        return "MISSING"


MISSING = _Missing()


class ExpressionError(ValueError):
    pass


class InputError(Exception):
    pass


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INDEX = re.compile(r"-?[0-9]+")


def _quoted(expr, pos):
    """Parse a double-quoted name starting at expr[pos] == '"'."""
    end = pos + 1
    while end < len(expr):
        ch = expr[end]
        if ch == "\\":
            end += 2
            continue
        if ch == '"':
            break
        end += 1
    else:
        raise ExpressionError("unterminated quoted name")
    try:
        name = json.loads(expr[pos:end + 1])
    except ValueError:
        raise ExpressionError("invalid quoted name")
    return name, end + 1


def _name(expr, pos):
    if pos < len(expr) and expr[pos] == '"':
        return _quoted(expr, pos)
    m = _IDENT.match(expr, pos)
    if not m:
        raise ExpressionError("expected a name at position %d" % pos)
    return m.group(0), m.end()


def _bracket(expr, pos):
    """Parse '[...]' starting at expr[pos] == '['."""
    close = expr.find("]", pos)
    if close < 0:
        raise ExpressionError("missing ']'")
    body = expr[pos + 1:close]
    if body == "*":
        return ("all", None), close + 1
    if _INDEX.fullmatch(body):
        return ("index", int(body)), close + 1
    raise ExpressionError("invalid index %r" % body)


def compile_expression(expr):
    """Turn an expression into a list of steps: (kind, argument)."""
    if expr == "@":
        return []
    if expr == "":
        raise ExpressionError("empty expression")
    steps = []
    pos = 0
    if expr[0] == "[":
        step, pos = _bracket(expr, 0)
    else:
        name, pos = _name(expr, 0)
        step = ("key", name)
    steps.append(step)
    while pos < len(expr):
        ch = expr[pos]
        if ch == ".":
            name, pos = _name(expr, pos + 1)
            steps.append(("key", name))
        elif ch == "[":
            step, pos = _bracket(expr, pos)
            steps.append(step)
        else:
            raise ExpressionError("unexpected %r at position %d" % (ch, pos))
    return steps


def evaluate(steps, value):
    for i, (kind, arg) in enumerate(steps):
        if kind == "key":
            if not isinstance(value, dict) or arg not in value:
                return MISSING
            value = value[arg]
        elif kind == "index":
            if not isinstance(value, list):
                return MISSING
            index = arg + len(value) if arg < 0 else arg
            if index < 0 or index >= len(value):
                return MISSING
            value = value[index]
        else:  # projection
            if not isinstance(value, list):
                return MISSING
            rest = steps[i + 1:]
            out = []
            for item in value:
                result = evaluate(rest, item)
                if result is not MISSING:
                    out.append(result)
            return out
    return value


def _reject_constant(name):
    raise ValueError("non-standard JSON constant %s" % name)


def _read_input(path, stdin):
    try:
        if path is None or path == "-":
            data = stdin.read()
        else:
            with open(path, "rb") as handle:
                data = handle.read()
    except OSError as exc:
        raise InputError("cannot read %s: %s" % (path, exc.strerror or exc))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("input is not valid UTF-8")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise InputError("invalid JSON: %s" % exc)


def _dump(value, compact):
    if compact:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False, indent=2)


def render(value, raw=False, compact=False, lines=False):
    if value is MISSING:
        value = None
    if lines and isinstance(value, list):
        out = []
        for item in value:
            if raw and isinstance(item, str):
                out.append(item + "\n")
            else:
                out.append(_dump(item, True) + "\n")
        return "".join(out)
    if raw and isinstance(value, str):
        return value + "\n"
    return _dump(value, compact) + "\n"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("jpick: %s\n" % message)
        sys.stderr.write(self.format_usage())
        sys.exit(EXIT_USAGE)


def _parser():
    p = _Parser(prog="jpick", description="Print the part of a JSON document selected by EXPRESSION.")
    p.add_argument("-r", "--raw", action="store_true", help="print string results without JSON quoting")
    p.add_argument("-c", "--compact", action="store_true", help="print compact JSON")
    p.add_argument("-l", "--lines", action="store_true", help="print each element of an array result on its own line")
    p.add_argument("-s", "--strict", action="store_true", help="exit 1 when the expression matches nothing")
    p.add_argument("expression", help="path expression, e.g. items[0].name")
    p.add_argument("file", nargs="?", default=None, help="JSON file to read; '-' or absent means standard input")
    return p


def main(argv=None, stdin=None, stdout=None, stderr=None):
    stdin = stdin if stdin is not None else sys.stdin.buffer
    stdout = stdout if stdout is not None else sys.stdout.buffer
    stderr = stderr if stderr is not None else sys.stderr
    args = _parser().parse_args(argv)
    try:
        steps = compile_expression(args.expression)
    except ExpressionError as exc:
        stderr.write("jpick: invalid expression %r: %s\n" % (args.expression, exc))
        return EXIT_USAGE
    try:
        document = _read_input(args.file, stdin)
    except InputError as exc:
        stderr.write("jpick: %s\n" % exc)
        return EXIT_INPUT
    result = evaluate(steps, document)
    if result is MISSING and args.strict:
        stderr.write("jpick: no match for %s\n" % args.expression)
        return EXIT_NO_MATCH
    stdout.write(render(result, args.raw, args.compact, args.lines).encode("utf-8"))
    stdout.flush()
    return EXIT_OK

"""jpick: print a part of a JSON document selected by a path expression."""

from .core import MISSING, ExpressionError, compile_expression, evaluate, main

__all__ = ["MISSING", "ExpressionError", "compile_expression", "evaluate", "main"]

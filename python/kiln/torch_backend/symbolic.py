"""torch's symbolic sizes (SymInt, sympy expressions over s0, s1...) as Kiln SymInt text.

Why: a Dynamo graph compiled with dynamic shapes names its sizes with sympy symbols; Kiln keeps
them symbolic (include/kiln/symint.h) so one compile serves every size. Kiln's expression syntax:
integers, names, + - * // %, max(a, b), parentheses.
"""
import sympy

from kiln.torch_backend.errors import LoweringError


def _join(op, parts):
    return "(" + f" {op} ".join(parts) + ")"


def sympy_to_kiln(expr):
    """Kiln SymInt text for a sympy integer expression; raises LoweringError for what Kiln's
    syntax cannot say (division that is not floor division, unbacked data-dependent sizes...)."""
    if expr.is_Integer:
        v = int(expr)
        return str(v) if v >= 0 else f"(0 - {-v})"
    if expr.is_Symbol:
        return str(expr)
    if isinstance(expr, sympy.Add):
        terms = [sympy_to_kiln(a) for a in expr.args]
        return _join("+", terms)
    if isinstance(expr, sympy.Mul):
        return _join("*", [sympy_to_kiln(a) for a in expr.args])
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        return _join("*", [sympy_to_kiln(expr.base)] * int(expr.exp))
    if isinstance(expr, sympy.Max) and len(expr.args) >= 2:
        out = sympy_to_kiln(expr.args[0])
        for a in expr.args[1:]:
            out = f"max({out}, {sympy_to_kiln(a)})"
        return out
    name = type(expr).__name__
    if name in ("FloorDiv", "CleanDiv", "IntTrueDiv") and len(expr.args) == 2:
        return _join("//", [sympy_to_kiln(a) for a in expr.args])
    if name in ("Mod", "PythonMod") and len(expr.args) == 2:
        return _join("%", [sympy_to_kiln(a) for a in expr.args])
    if name == "ModularIndexing" and len(expr.args) == 3:
        x, div, mod = (sympy_to_kiln(a) for a in expr.args)
        return f"(({x} // {div}) % {mod})"
    raise LoweringError(f"symbolic size {expr} ({name}) has no Kiln form")


def dim(d):
    """An int, or Kiln text for a torch.SymInt (a constant SymInt gives its int)."""
    if isinstance(d, bool):
        raise LoweringError(f"a bool ({d}) where a size is expected")
    if isinstance(d, int):
        return d
    node = getattr(d, "node", None)
    if node is None:
        raise LoweringError(f"{d!r} is not a size")
    as_int = node.maybe_as_int() if hasattr(node, "maybe_as_int") else None
    if as_int is not None:
        return int(as_int)
    expr = node.expr
    shape_env = getattr(node, "shape_env", None)
    if shape_env is not None:
        expr = shape_env.replace(expr)
    if expr.is_Integer:
        return int(expr)
    return sympy_to_kiln(expr)


def symbols_of(d):
    """Free symbol names of a Kiln dim (an int has none)."""
    if isinstance(d, int):
        return set()
    return _names(d)


def _names(text):
    out, cur = set(), ""
    for ch in text + " ":
        if ch.isalnum() or ch == "_":
            cur += ch
        else:
            if cur and not cur[0].isdigit() and cur != "max":
                out.add(cur)
            cur = ""
    return out

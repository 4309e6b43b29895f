"""Why a node or partition stays in torch: LoweringError carries the reason, and the helper
builds kiln.UnsupportedOpError naming the node, op and the user's source line."""
from kiln._kiln import UnsupportedOpError


class LoweringError(Exception):
    """Kiln cannot take this node (or partition); the message says why."""


def source_line(node):
    """The user's source line that made an FX node (Dynamo's stack_trace), or ''."""
    trace = (getattr(node, "meta", None) or {}).get("stack_trace") or ""
    lines = [l.strip() for l in trace.strip().splitlines() if l.strip()]
    # The trace ends with '  File "...", line N, in f' then the code line.
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            code = lines[i + 1] if i + 1 < len(lines) else ""
            return f"{lines[i]}: {code}".strip()
    return lines[-1] if lines else ""


def unsupported_error(node, reason):
    op = str(getattr(node, "target", node))
    line = source_line(node)
    msg = f"node '{node.name}' (op {op}): {reason}"
    if line:
        msg += f"\n  from: {line}"
    err = UnsupportedOpError(msg)
    err.node = node.name
    err.op = op
    err.source_line = line
    err.reason = reason
    return err

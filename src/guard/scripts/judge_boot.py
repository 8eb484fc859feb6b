# cbrun judge boot (src/guard/scripts/judge_boot.py).
#
# Installed as /.cbrun/judge-py/sitecustomize.py (found through
# PYTHONPATH=/.cbrun/judge-py) and run by path from a .pth file in the user
# site directory cbrun points PYTHONUSERBASE at (read whatever PYTHONPATH a
# test command sets, before any other .pth and before sitecustomize). Runs
# once per process. While it runs, workspace directories are taken off
# sys.path, so nothing it imports can be a module of the workspace; it then
# loads, by path and never by name, the result reporter (_cbrun_report) and
# the ban hook (_cbrun_judge_hook), and, when it is the sitecustomize,
# chains to the sitecustomize it shadows (never one in the workspace).

import sys


def _cbrun_in_ws(p):
    import os

    ws = os.path.normpath(os.environ.get("CBRUN_WORKSPACE") or "/app")
    try:
        a = os.path.abspath(p or ".")
        r = os.path.realpath(a)
    except Exception:
        return True
    return any(x == ws or x.startswith(ws.rstrip("/") + "/") for x in (a, r))


def _cbrun_load(here, name, file):
    import os

    p = os.path.join(here, file)
    m = type(sys)(name)
    m.__file__ = p
    with open(p, "rb") as f:
        code = compile(f.read(), p, "exec")
    sys.modules[name] = m
    exec(code, m.__dict__)
    return m


def _cbrun_chain(here):
    # Run the sitecustomize this file shadows, unless it is workspace code.
    import importlib.machinery
    import importlib.util
    import os

    path = [p for p in sys.path if isinstance(p, str) and os.path.abspath(p or ".") != here and not _cbrun_in_ws(p)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _cbrun_boot(first, chain):
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if isinstance(p, str) and not _cbrun_in_ws(p)]
    try:
        if first:
            try:
                rep = _cbrun_load(here, "_cbrun_report", "_cbrun_report.py")
                rep.SESSION = rep._start(saved)
            except Exception as e:
                sys.stderr.write("[cbrun judge] reporter not started: %s: %s\n" % (type(e).__name__, e))
            try:
                _cbrun_load(here, "_cbrun_judge_hook", "_cbrun_judge_hook.py")
            except Exception as e:
                sys.stderr.write("[cbrun judge-ban] hook not installed: %s: %s\n" % (type(e).__name__, e))
        if chain:
            try:
                _cbrun_chain(here)
            except Exception as e:
                sys.stderr.write(
                    "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n" % (type(e).__name__, e)
                )
    finally:
        added = [p for p in sys.path if p not in saved]
        sys.path[:] = saved + added


if not getattr(sys, "_cbrun_boot", False):
    sys._cbrun_boot = True
    _cbrun_boot(True, __name__ == "sitecustomize")
elif __name__ == "sitecustomize":
    _cbrun_boot(False, True)

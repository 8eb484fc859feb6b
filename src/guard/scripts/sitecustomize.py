# cbrun solve-time hook (generated from src/guard/scripts/sitecustomize.py).
#
# Loaded through PYTHONPATH=/.cbrun/py. When pip resolves an install,
# download or wheel, every requirement the user asked for (command line,
# requirement files, editables) and every direct dependency of a local
# project being installed is checked against sha256 hashes of the
# PEP 503-normalised banned names; a hit prints
# "[cbrun denylist] blocked install of NAME" and exits 1. Dependencies of
# other packages are not checked. Then any sitecustomize this file shadows
# is run. A tripwire: `python -S`, `-I`, `-E` or an emptied PYTHONPATH skip
# it; the real barrier is the network policy and cbrun's registry index
# (PIP_INDEX_URL), which refuses banned projects and their files, for
# dependencies of other packages too.

import sys

_CBRUN_BANS = frozenset(@@CBRUN_PY_HASHES@@)

_CBRUN_RESOLVERS = (
    "pip._internal.resolution.resolvelib.resolver",
    "pip._internal.resolution.legacy.resolver",
)
# Checked before pip does anything else (e.g. refuses an externally managed
# environment), so a banned name always gets the denylist message.
_CBRUN_COMMANDS = (
    "pip._internal.commands.install",
    "pip._internal.commands.download",
    "pip._internal.commands.wheel",
)
_CBRUN_HOOKED = _CBRUN_RESOLVERS + _CBRUN_COMMANDS


def _cbrun_install():
    import hashlib
    import os
    import re

    upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    lower = "abcdefghijklmnopqrstuvwxyz"
    ascii_lower = {ord(u): l for u, l in zip(upper, lower)}

    def banned(name):
        key = re.sub(r"[-_.]+", "-", name).translate(ascii_lower)
        return hashlib.sha256(key.encode("utf-8")).hexdigest() in _CBRUN_BANS

    def block(name):
        try:
            sys.stdout.flush()
        except Exception:
            pass
        sys.stderr.write("[cbrun denylist] blocked install of %s\n" % name)
        sys.stderr.flush()
        # pip turns SystemExit into "ERROR: Exception" with status 2.
        os._exit(1)

    def check(ireq):
        name = getattr(ireq, "name", None)
        if not name:
            req = getattr(ireq, "req", None)
            name = getattr(req, "name", None)
        if name and banned(name):
            block(name)

    def local_project(ireq):
        # A dependency whose parent is a project in a local directory (or an
        # editable): that project's own declared dependency.
        parent = getattr(ireq, "comes_from", None)
        if parent is None or isinstance(parent, str):
            return False
        if getattr(parent, "editable", False):
            return True
        link = getattr(parent, "link", None)
        try:
            return bool(link is not None and link.is_existing_dir())
        except Exception:
            return False

    def wrap(orig):
        def resolve(self, root_reqs, *args, **kwargs):
            for r in root_reqs:
                check(r)
            result = orig(self, root_reqs, *args, **kwargs)
            try:
                reqs = list(result.all_requirements)
            except Exception:
                reqs = []
            for r in reqs:
                if getattr(r, "user_supplied", False) or local_project(r):
                    check(r)
            return result

        resolve._cbrun = True
        return resolve

    spec_name = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")

    def check_spec(text):
        # A requirement as typed: `Name[extra]==1; marker`. Paths, URLs and
        # options are left to the resolver check.
        text = text.strip()
        if not text or text[0] in "-#./~" or "://" in text:
            return
        m = spec_name.match(text)
        if m and banned(m.group(1)):
            block(m.group(1))

    def check_files(paths, depth=0):
        for path in paths or ():
            try:
                lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
            except Exception:
                continue
            for line in lines:
                line = line.split(" #", 1)[0].strip()
                if line.startswith(("-r ", "-c ", "--requirement ", "--constraint ")) and depth < 8:
                    check_files([line.split(None, 1)[1].strip()], depth + 1)
                else:
                    check_spec(line)

    def wrap_run(orig):
        def run(self, options, args):
            for a in args or ():
                check_spec(a)
            check_files(getattr(options, "requirements", None))
            check_files(getattr(options, "constraints", None))
            return orig(self, options, args)

        run._cbrun = True
        return run

    def patch(module):
        cls = getattr(module, "Resolver", None)
        fn = getattr(cls, "resolve", None)
        if fn is not None and not getattr(fn, "_cbrun", False):
            cls.resolve = wrap(fn)
        for cname in ("InstallCommand", "DownloadCommand", "WheelCommand"):
            cls = getattr(module, cname, None)
            fn = getattr(cls, "run", None)
            if fn is not None and not getattr(fn, "_cbrun", False):
                cls.run = wrap_run(fn)

    class Loader(object):
        def __init__(self, inner):
            self._inner = inner

        def create_module(self, spec):
            create = getattr(self._inner, "create_module", None)
            return create(spec) if create else None

        def exec_module(self, module):
            self._inner.exec_module(module)
            try:
                patch(module)
            except Exception:
                pass

        def __getattr__(self, name):
            return getattr(self._inner, name)

    class Finder(object):
        # Patches pip's resolvers right after they are imported.
        def find_spec(self, fullname, path=None, target=None):
            if fullname not in _CBRUN_HOOKED:
                return None
            for f in sys.meta_path:
                if f is self or not hasattr(f, "find_spec"):
                    continue
                spec = f.find_spec(fullname, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = Loader(spec.loader)
                    return spec
            return None

    for name in _CBRUN_HOOKED:
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, Finder())


def _cbrun_chain():
    # Run the sitecustomize this one shadows (e.g. Debian's apport hook).
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if _CBRUN_BANS and not getattr(sys, "_cbrun_solve_hook", False):
    sys._cbrun_solve_hook = True
    try:
        _cbrun_install()
    except Exception:
        pass
if __name__ == "sitecustomize":
    try:
        _cbrun_chain()
    except Exception as e:
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n" % (type(e).__name__, e))

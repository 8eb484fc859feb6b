# cbrun judge-time ban hook (src/guard/scripts/judge_sitecustomize.py).
#
# Loaded by path (as `_cbrun_judge_hook`) by cbrun's judge boot file
# (scripts/judge_boot.py), which runs it from the user site directory's .pth
# and from sitecustomize, so that a test command's own `PYTHONPATH=src` does
# not drop it. Configured by:
#   CBRUN_WORKSPACE      the product's root (default /app)
#   CBRUN_IMPORT_BAN     comma-separated module names (`pkg` or `pkg.sub`)
#   CBRUN_JUDGE_BANS     comma-separated: socket, subprocess, network,
#                        filesystem_outside_workspace
#   CBRUN_BAN_LOG        optional file to append one JSON line per violation
#   CBRUN_FS_WRITE_ALLOW colon-separated roots writable besides the
#                        workspace (default /tmp:/dev)
#   CBRUN_FS_READ_ALLOW  colon-separated roots readable besides those, the
#                        Python installation and the startup sys.path
#                        (default /tests:/proc:/sys:/usr:/lib:/lib32:/lib64:
#                        /libx32:/bin:/sbin:/etc)
#
# Import bans apply to imports made by workspace code: any module whose file
# is under the workspace, wherever it sits there (a site-packages directory
# inside the workspace is the agent's code too). The hidden tests under
# /tests may import anything, and libraries installed outside the workspace
# may use what they like internally. Runtime bans apply while any frame of
# workspace code is on the stack, or anywhere in a process whose main
# program is in the workspace (a CLI product run by the tests). A violation
# prints "[cbrun judge-ban] ..." to stderr and raises
# ImportError/PermissionError. A tripwire: `python -I`/`-E`, ctypes, or a
# child started with a scrubbed environment escape it; the sandbox (no
# network, read-only root) is the wall.

import sys


def _cbrun_judge():
    import os

    env = os.environ
    ws = os.path.normpath(env.get("CBRUN_WORKSPACE") or "/app")
    import_ban = tuple(sorted(set(b.strip() for b in env.get("CBRUN_IMPORT_BAN", "").split(",") if b.strip())))
    bans = set(b.strip() for b in env.get("CBRUN_JUDGE_BANS", "").split(",") if b.strip())
    log_path = env.get("CBRUN_BAN_LOG") or None
    if not import_ban and not bans:
        return

    import _thread

    here = os.path.normcase(os.path.abspath(__file__))
    state = _thread._local()
    reported = set()

    def under(path, root):
        return path == root or path.startswith(root.rstrip("/") + "/")

    def absfile(f):
        if not f or f.startswith("<"):
            return None
        if not os.path.isabs(f):
            try:
                f = os.path.join(os.getcwd(), f)
            except OSError:
                return None
        return os.path.normpath(f)

    resolved = {}

    def agent_file(f):
        a = absfile(f)
        if a is None:
            return None
        if under(a, ws):
            return a
        # A symlink elsewhere that resolves into the workspace is its code.
        r = resolved.get(a)
        if r is None:
            try:
                r = os.path.realpath(a)
            except Exception:
                r = a
            if len(resolved) < 10000:
                resolved[a] = r
        return a if under(r, ws) else None

    def report(kind, what, where):
        msg = "[cbrun judge-ban] %s: %s from %s" % (kind, what, where)
        key = (kind, what, where)
        if key in reported:
            return msg
        reported.add(key)
        state.busy = True
        try:
            try:
                sys.stderr.write(msg + "\n")
                sys.stderr.flush()
            except Exception:
                pass
            if log_path:
                try:
                    import json

                    with open(log_path, "a") as f:
                        rec = {"kind": kind, "what": what, "where": where, "pid": os.getpid()}
                        f.write(json.dumps(rec) + "\n")
                except Exception:
                    pass
        finally:
            state.busy = False
        return msg

    # ---------------------------------------------------------------- imports

    if import_ban:
        import builtins
        import importlib

        tops = frozenset(b.split(".")[0] for b in import_ban)
        importlib_dir = os.path.dirname(os.path.abspath(importlib.__file__))

        def banned(name):
            for b in import_ban:
                if name == b or name.startswith(b + "."):
                    return b
            return None

        def package_of(g):
            if not isinstance(g, dict):
                return ""
            pkg = g.get("__package__")
            if pkg is None:
                pkg = g.get("__name__") or ""
                if "__path__" not in g:
                    pkg = pkg.rpartition(".")[0]
            return pkg or ""

        def absolute(name, pkg, level):
            if level <= 0:
                return name
            bits = pkg.rsplit(".", level - 1) if pkg else []
            if len(bits) < level:
                return name
            return bits[0] + "." + name if name else bits[0]

        def stack_importer():
            # The first frame that is not the import machinery or this hook.
            f = sys._getframe(1)
            while f is not None:
                fn = f.f_code.co_filename
                if not fn.startswith("<"):
                    a = os.path.normcase(os.path.abspath(fn))
                    if a != here and os.path.dirname(a) != importlib_dir:
                        return fn
                f = f.f_back
            return None

        def refuse(name, importer):
            msg = "cbrun: import of banned module %s from %s" % (name, importer)
            report("import", name, importer)
            return ModuleNotFoundError(msg, name=name)

        def check(names, g):
            hit = None
            for n in names:
                if banned(n):
                    hit = n
                    break
            if hit is None:
                return
            f = g.get("__file__") if isinstance(g, dict) else None
            if not f or f.startswith("<"):
                f = stack_importer()
            imp = agent_file(f)
            if imp is not None:
                raise refuse(hit, imp)

        orig_import = builtins.__import__

        def __import__(name, globals=None, locals=None, fromlist=(), level=0):
            if level:
                pkg = package_of(globals)
                if pkg.partition(".")[0] in tops:
                    base = absolute(name, pkg, level)
                    check([base] + [base + "." + x for x in fromlist or () if x != "*"], globals)
            elif name.partition(".")[0] in tops:
                check([name] + [name + "." + x for x in fromlist or () if x != "*"], globals)
            return orig_import(name, globals, locals, fromlist, level)

        orig_import_module = importlib.import_module

        def import_module(name, package=None):
            absname = name
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                absname = absolute(name[level:], package or "", level)
            if absname.partition(".")[0] in tops:
                check([absname], None)
            return orig_import_module(name, package)

        class BanFinder(object):
            # Imports that bypass __import__ (importlib internals, runpy...).
            def find_spec(self, fullname, path=None, target=None):
                if fullname.partition(".")[0] in tops and banned(fullname):
                    imp = agent_file(stack_importer())
                    if imp is not None:
                        raise refuse(fullname, imp)
                return None

        builtins.__import__ = __import__
        importlib.import_module = import_module
        sys.meta_path.insert(0, BanFinder())

    # ---------------------------------------------------------------- runtime

    if bans and hasattr(sys, "addaudithook"):
        watch = {}

        def add(kind, events):
            for e in events:
                watch.setdefault(e, []).append(kind)

        if "socket" in bans:
            add("socket", ("socket.__new__", "socket.bind", "socket.connect", "socket.sendto", "socket.sendmsg"))
        if "network" in bans:
            add(
                "network",
                (
                    "socket.connect",
                    "socket.sendto",
                    "socket.sendmsg",
                    "socket.getaddrinfo",
                    "socket.gethostbyname",
                    "socket.gethostbyaddr",
                    "socket.getnameinfo",
                ),
            )
        if "subprocess" in bans:
            add(
                "subprocess",
                ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.startfile", "pty.spawn"),
            )
        fs_ban = "filesystem_outside_workspace" in bans
        if fs_ban:
            add(
                "filesystem_outside_workspace",
                (
                    "open",
                    "os.remove",
                    "os.rmdir",
                    "os.mkdir",
                    "os.rename",
                    "os.chmod",
                    "os.chown",
                    "os.symlink",
                    "os.link",
                    "os.truncate",
                    "os.utime",
                    "os.listdir",
                    "os.scandir",
                    "os.mknod",
                    "os.mkfifo",
                ),
            )

        def roots(var, default):
            return [os.path.normpath(r) for r in env.get(var, default).split(":") if r.startswith("/")]

        write_ok = [ws] + roots("CBRUN_FS_WRITE_ALLOW", "/tmp:/dev")
        read_ok = write_ok + roots("CBRUN_FS_READ_ALLOW", "/tests:/proc:/sys:/usr:/lib:/lib32:/lib64:/libx32:/bin:/sbin:/etc")
        for p in [sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", ""), getattr(sys, "base_exec_prefix", "")] + list(sys.path):
            if p and os.path.isabs(p):
                read_ok.append(os.path.normpath(p))
        read_ok.append(os.path.dirname(here))

        loopback = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "", "0.0.0.0", "::", "::1")

        def is_loopback(host):
            if host is None:
                return True
            if isinstance(host, bytes):
                host = host.decode("ascii", "replace")
            if not isinstance(host, str):
                return False
            h = host.strip("[]").lower()
            return (
                h in loopback
                or h.startswith("127.")
                or h.startswith("::ffff:127.")
                or h.endswith(".localhost")
                or h == "0:0:0:0:0:0:0:1"
            )

        def inet_target(addr):
            # The non-loopback host an address names, or None.
            if isinstance(addr, tuple) and addr:
                return None if is_loopback(addr[0]) else addr[0]
            return None  # AF_UNIX paths, None (connected socket)

        wflags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

        def fs_path(p):
            if isinstance(p, int) or p is None:
                return None if isinstance(p, int) else "."
            try:
                p = os.fsdecode(os.fspath(p))
            except TypeError:
                return None
            return p

        def outside(p, write):
            p = fs_path(p)
            if p is None:
                return None
            a = os.path.abspath(p)
            ok = write_ok if write else read_ok
            if write and "/__pycache__/" in a:
                return None  # bytecode cache, written by the interpreter
            if not any(under(a, r) for r in ok):
                return a
            # A symlink under the workspace or /tmp may point anywhere.
            if any(under(a, r) for r in write_ok):
                real = os.path.realpath(a)
                if real != a and not any(under(real, r) for r in ok):
                    return "%s -> %s" % (a, real)
            return None

        def violation(kind, event, args):
            if kind == "socket":
                return event
            if kind == "network":
                if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
                    t = inet_target(args[1] if len(args) > 1 else None)
                    return None if t is None else "%s to %r" % (event, t)
                if event == "socket.getnameinfo":
                    t = inet_target(args[0] if args else None)
                    return None if t is None else "%s(%r)" % (event, t)
                host = args[0] if args else None
                return None if is_loopback(host) else "%s(%r)" % (event, host)
            if kind == "subprocess":
                shown = args[1] if event == "subprocess.Popen" and len(args) > 1 else (args[0] if args else "")
                return "%s(%r)" % (event, shown)
            # filesystem_outside_workspace
            if event == "open":
                mode = args[1] if len(args) > 1 else None
                flags = args[2] if len(args) > 2 else 0
                write = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                    isinstance(flags, int) and flags & wflags
                )
                p = outside(args[0] if args else None, bool(write))
                return None if p is None else "open(%s, %s)" % (p, "write" if write else "read")
            if event in ("os.listdir", "os.scandir"):
                p = outside(args[0] if args else None, False)
                return None if p is None else "%s(%s)" % (event, p)
            if event in ("os.rename", "os.symlink", "os.link"):
                src = None if event == "os.symlink" else outside(args[0] if args else None, event == "os.rename")
                dst = outside(args[1] if len(args) > 1 else None, True)
                p = dst or src
                return None if p is None else "%s(%s)" % (event, p)
            p = outside(args[0] if args else None, True)
            return None if p is None else "%s(%s)" % (event, p)

        def product():
            # The main program's file: a script, or a module run with -m.
            m = sys.modules.get("__main__")
            f = getattr(m, "__file__", None)
            if not f and sys.argv and sys.argv[0] not in ("", "-c", "-m") and os.path.isfile(sys.argv[0]):
                f = sys.argv[0]
            return agent_file(f)

        def agent_frame():
            p = product()
            if p is not None:
                return p
            f = sys._getframe(1)
            while f is not None:
                a = agent_file(f.f_code.co_filename)
                if a is not None:
                    return "%s:%d" % (a, f.f_lineno)
                f = f.f_back
            return None

        def hook(event, args):
            kinds = watch.get(event)
            if kinds is None or getattr(state, "busy", False):
                return
            state.busy = True
            found = None
            try:
                for kind in kinds:
                    what = violation(kind, event, args)
                    if what is None:
                        continue
                    where = agent_frame()
                    if where is not None:
                        found = (kind, what, where)
                    break
            except Exception:
                found = None
            finally:
                state.busy = False
            if found is not None:
                raise PermissionError(report(*found))

        sys.addaudithook(hook)


if not getattr(sys, "_cbrun_judge", False):
    sys._cbrun_judge = True
    try:
        _cbrun_judge()
    except Exception as e:
        sys.stderr.write("[cbrun judge-ban] hook not installed: %s: %s\n" % (type(e).__name__, e))

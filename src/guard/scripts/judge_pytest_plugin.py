# cbrun's pytest plugin (src/guard/scripts/judge_pytest_plugin.py).
#
# Preloaded by path by the reporter (_cbrun_report) as `_cbrun_pytest` and
# registered with `-p _cbrun_pytest` (in PYTEST_ADDOPTS). It reports to the
# reporter's session: the collected items (and collection errors) as the
# inventory, each test's outcome from its setup/call/teardown reports, and
# the end of the session. A test passes only when all three phases passed;
# an xfail counts as skipped and an xpass as failed. At registration (before
# any conftest or test module is imported) it captures pytest's and
# pluggy's functions and classes; after every test it checks those a test's
# run goes through, at the end all of them, and that no hook implementation
# comes from the workspace. Between
# registration and the session's start pytest itself adds and replaces a
# few attributes (its legacy-path shims): changes then count only when the
# new code is not pytest's own; from the session's start on, any change
# counts.
"""cbrun's pytest plugin (already imported when pytest registers it).

PYTEST_DONT_REWRITE
"""

import sys

_PHASES = ("setup", "call", "teardown")


def _session():
    r = sys.modules.get("_cbrun_report")
    s = getattr(r, "SESSION", None)
    return None if s is None or s.dead else s


_state = {"run": None, "phases": {}, "collect_errors": [], "hot": []}


def _hook_findings(S, config):
    bad = []
    try:
        relay = config.pluginmanager.hook
        for name in list(vars(relay)):
            caller = getattr(relay, name, None)
            get = getattr(caller, "get_hookimpls", None)
            if get is None:
                continue
            for impl in get():
                where = S.code_in_ws(getattr(impl, "function", None))
                if where:
                    bad.append("runner patched: the pytest hook %s is implemented in %s" % (name, where))
        for name, plugin in config.pluginmanager.list_name_plugin():
            f = getattr(plugin, "__file__", None) if isinstance(plugin, type(sys)) else None
            if f is None and plugin is not None and not isinstance(plugin, type(sys)):
                mod = sys.modules.get(getattr(type(plugin), "__module__", ""), None)
                f = getattr(mod, "__file__", None)
            if isinstance(f, str) and (S.inside(S.realpath(f), S.ws) or S.inside(f, S.ws)):
                bad.append("runner patched: the pytest plugin %s comes from %s" % (name, f))
    except Exception as e:
        bad.append("runner patched: pytest's plugin manager cannot be inspected (%s)" % type(e).__name__)
    return bad


# The modules a test's run goes through, checked after every test; the
# rest of pytest is checked at the session's start and end.
_HOT = (
    "pytest",
    "_pytest.runner",
    "_pytest.python",
    "_pytest.python_api",
    "_pytest.raises",
    "_pytest.reports",
    "_pytest.main",
    "_pytest.unittest",
    "_pytest.fixtures",
    "_pytest.outcomes",
    "_pytest.skipping",
    "_pytest.nodes",
    "_pytest.assertion",
    "_pytest.assertion.rewrite",
    "_pytest.assertion.util",
    "pluggy._callers",
    "pluggy._hooks",
    "pluggy._manager",
    "pluggy._result",
)


def _check(S, deep=False):
    if deep:
        findings = S.check(S.pytest_watch, deep=True) + S.check(S.watched, deep=True)
    else:
        findings = S.check(_state["hot"]) + S.check(S.watched)
    cfg = S.pytest_config
    if cfg is not None:
        # Hook implementations change only when plugins come or go: scan
        # them then (and at the end).
        try:
            sig = tuple(sorted(id(p) for p in cfg.pluginmanager.get_plugins()))
        except Exception:
            sig = None
        if deep or sig is None or sig != _state.get("plugins"):
            _state["plugins"] = sig
            findings += _hook_findings(S, cfg)
    S.tamper(findings)


def pytest_addoption(parser, pluginmanager):
    S = _session()
    if S is None:
        return
    S.mode = "pytest"
    S.pytest_watch = S.watch(_pytest_modules())


def pytest_configure(config):
    S = _session()
    if S is not None:
        S.pytest_config = config


def _pytest_modules():
    return [
        m
        for n, m in sorted(sys.modules.items())
        if m is not None and n.partition(".")[0] in ("pytest", "_pytest", "pluggy") and hasattr(m, "__dict__")
    ]


def pytest_sessionstart(session):
    S = _session()
    if S is None:
        return
    S.tamper(S.check(S.pytest_watch, lenient=True) + S.check(S.watched))
    S.pytest_watch = S.watch(_pytest_modules())
    _state["hot"] = S.watch([m for m in _pytest_modules() if m.__name__ in _HOT])


def pytest_collectreport(report):
    if getattr(report, "failed", False):
        _state["collect_errors"].append(str(getattr(report, "nodeid", "") or "?"))


def pytest_collection_finish(session):
    S = _session()
    if S is None:
        return
    ids = [str(i.nodeid) for i in session.items]
    errors = ["<collection error> " + n for n in _state["collect_errors"]]
    _state["run"] = S.new_run("pytest", ids + errors)
    for e in errors:
        S.test(_state["run"], e, "error", "collection failed")
    _check(S)


def _outcome(reps):
    # reps: when -> report
    for when in _PHASES:
        r = reps.get(when)
        if r is None:
            return "error", "no %s report" % when
        if r.failed:
            if hasattr(r, "wasxfail"):
                return "failed", "xpass (strict)"
            return ("failed", "") if when == "call" else ("error", "%s failed" % when)
    for when in _PHASES:
        r = reps[when]
        if r.skipped:
            return "skipped", "xfail" if hasattr(r, "wasxfail") else "skipped"
    if hasattr(reps["call"], "wasxfail"):
        return "failed", "xpass"
    return "passed", ""


def pytest_runtest_logreport(report):
    S = _session()
    run = _state["run"]
    if S is None or run is None:
        return
    nid = str(report.nodeid)
    reps = _state["phases"].setdefault(nid, {})
    when = getattr(report, "when", None)
    if when in reps:
        reps[when + "#again"] = report
        return
    reps[when] = report
    if when == "setup" and (report.failed or report.skipped):
        # pytest reports no call for a test whose setup did not pass.
        reps.setdefault("call", report)
    if when == "teardown":
        _check(S)
        o, why = _outcome(reps)
        if any(k.endswith("#again") for k in reps):
            o, why = "error", "a phase was reported twice"
        S.test(run, nid, o, why)
        del _state["phases"][nid]


def pytest_sessionfinish(session, exitstatus):
    S = _session()
    run = _state["run"]
    if S is None or run is None:
        return
    for nid, reps in list(_state["phases"].items()):
        o, why = _outcome(reps)
        S.test(run, nid, "error" if o == "passed" else o, why or "unfinished")
    _state["phases"].clear()
    _check(S, deep=True)
    S.emit("end", run=run, runner="pytest", exitstatus=int(exitstatus), ok=int(exitstatus) == 0)
    _state["run"] = None

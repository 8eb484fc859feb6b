"""Run stdlib unittest test files given by path.

`python3 -m unittest path/to/test_x.py` only accepts paths below the current
directory, while the judge runs from the workspace (/app) and the tests live
elsewhere (/tests/final). This runner loads each named file by path and runs
all the tests in it with a verbose TextTestRunner that reports on stdout.

Exit status: 0 when every test passed, 1 when any failed or errored,
2 when a named file is missing or no file was named.
"""

import importlib.util
import os
import sys
import unittest

sys.dont_write_bytecode = True  # never write __pycache__ into the tests or the workspace


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception as exc:  # report an unimportable file as one erroring test
        error = exc

        class ImportFailure(unittest.TestCase):
            def test_import(self):
                raise error

        ImportFailure.__module__ = name
        ImportFailure.__qualname__ = "ImportFailure"
        return unittest.defaultTestLoader.loadTestsFromTestCase(ImportFailure)
    return unittest.defaultTestLoader.loadTestsFromModule(module)


def main(argv):
    if not argv:
        print("run_unittests.py: no test files given", file=sys.stderr)
        return 2
    suite = unittest.TestSuite()
    for path in argv:
        if not os.path.isfile(path):
            print("run_unittests.py: no such test file: %s" % path, file=sys.stderr)
            return 2
        here = os.path.dirname(os.path.abspath(path))
        if here not in sys.path:
            sys.path.append(here)
        suite.addTests(load(path))
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

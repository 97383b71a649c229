"""What the client scripts share: named steps that each assert, run at once and
counted, and the summary line ``N passed, N failed`` that scripts/clients adds up."""

import traceback

results = []


def step(name):
    """Runs the decorated function at once as one named, counted step."""
    def run(fn):
        try:
            fn()
        except Exception:  # noqa: BLE001 - a failing step is reported, not fatal
            results.append((name, False))
            print('FAIL %s' % name)
            traceback.print_exc(limit=3)
        else:
            results.append((name, True))
            print('ok   %s' % name)
        return fn
    return run


def summary():
    """Prints the summary line; the exit status: 1 if any step failed."""
    passed = sum(1 for _, ok in results if ok)
    failed = len(results) - passed
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0

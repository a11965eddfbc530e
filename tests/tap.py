# tap.py - TAP output for the tests written in Python, as tests/tap.h is for
# the C ones: one "ok N - what" line per check (with the detail as comments
# when it failed), the plan at the end, and the exit status meson reads.
#
# SPDX-License-Identifier: Apache-2.0
import sys

_count = 0
_failed = 0


def tap(ok, what, detail=""):
    """One check: ok or not, what it checked; detail is shown only on failure."""
    global _count, _failed
    _count += 1
    if not ok:
        _failed += 1
    print(("ok" if ok else "not ok") + " %d - %s" % (_count, what), flush=True)
    if not ok and detail:
        for line in str(detail).splitlines():
            print("# " + line, flush=True)
    return ok


def bail(msg):
    print("Bail out! " + msg, flush=True)
    sys.exit(1)


def failed():
    """How many checks failed so far."""
    return _failed


def done():
    """Print the plan; the exit status for sys.exit()."""
    print("1..%d" % _count, flush=True)
    return 1 if _failed else 0

#!/usr/bin/env python3
# gen-config-keys - src/gen_config_keys.py, the generator of config.c's key
# table, on the real src/config_keys.dat and on broken copies of it (TAP).
#
# The real file must give exactly the config_keys.h the build compiled. Each
# broken copy (two keys out of order, a key without its description, a field
# its type does not take, an int default outside its bounds, an enum default
# outside its choices, not a Python literal) must be refused: a non-zero
# exit, nothing written, and a message naming the key and the problem.
#
#   gen-config-keys.py GENERATOR CONFIG_KEYS_DAT BUILT_CONFIG_KEYS_H
#
# SPDX-License-Identifier: Apache-2.0
import ast
import os
import pprint
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tap import done, tap  # noqa: E402

def run(gen, dat_text, work):
    dat = os.path.join(work, "config_keys.dat")
    out = os.path.join(work, "config_keys.h")
    if os.path.exists(out):
        os.unlink(out)
    with open(dat, "w", encoding="ascii") as f:
        f.write(dat_text)
    p = subprocess.run([sys.executable, gen, dat, out], capture_output=True, text=True)
    text = None
    if os.path.exists(out):
        with open(out, encoding="ascii") as f:
            text = f.read()
    return p.returncode, p.stderr, text


def main():
    gen, dat, built = sys.argv[1:4]
    with open(dat, encoding="ascii") as f:
        original = f.read()
    keys = ast.literal_eval(original)
    with open(built, encoding="ascii") as f:
        built_text = f.read()

    def find(pred):
        return next(i for i, k in enumerate(keys) if pred(k))

    def broken(change):
        copy = [dict(k) for k in keys]
        change(copy)
        return pprint.pformat(copy, width=100) + "\n"

    i_int = find(lambda k: k["type"] == "int")
    i_enum = find(lambda k: k["type"] == "enum")
    i_str = find(lambda k: k["type"] == "string")

    def swap(c):
        c[0], c[1] = c[1], c[0]

    def no_desc(c):
        del c[i_str]["desc"]

    def stray(c):
        c[i_str]["min"] = 0

    def int_out(c):
        c[i_int]["default"] = c[i_int]["max"] + 1

    def enum_out(c):
        c[i_enum]["default"] = "no-such-choice"

    with tempfile.TemporaryDirectory() as work:
        rc, err, text = run(gen, original, work)
        tap(rc == 0 and text == built_text,
            "the real config_keys.dat gives the config_keys.h the build compiled (%d keys)"
            % len(keys), err)
        # The same keys reformatted: the generator reads data, not layout.
        rc, err, text = run(gen, broken(lambda c: None), work)
        tap(rc == 0 and text == built_text, "the same keys in another layout give the same table",
            err)
        cases = [
            ("two keys out of order", swap, keys[0]["name"],
             "not after %s" % keys[1]["name"]),
            ("a key without its description", no_desc, keys[i_str]["name"], "no desc"),
            ("a field its type does not take", stray, keys[i_str]["name"],
             "min does not apply to a string key"),
            ("an int default outside its bounds", int_out, keys[i_int]["name"],
             "is not within [%d, %d]" % (keys[i_int]["min"], keys[i_int]["max"])),
            ("an enum default outside its choices", enum_out, keys[i_enum]["name"],
             "'no-such-choice' is not one of its choices"),
        ]
        for what, change, name, says in cases:
            rc, err, text = run(gen, broken(change), work)
            tap(rc != 0 and text is None and name in err and says in err,
                "refused: %s (%s: %s)" % (what, name, says),
                "exit %d, output %s, stderr:\n%s" % (rc, "written" if text else "none", err))
        # The closing bracket of the list cut off.
        rc, err, text = run(gen, original.rstrip().rstrip("]"), work)
        tap(rc != 0 and text is None and "not a Python literal" in err,
            "refused: not a Python literal", "exit %d, stderr:\n%s" % (rc, err))
    return done()


if __name__ == "__main__":
    sys.exit(main())

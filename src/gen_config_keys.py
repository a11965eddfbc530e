#!/usr/bin/env python3
# gen_config_keys.py - turns config_keys.dat into config.c's key table (the
# choices arrays and keys[]), run by meson at build time:
#   gen_config_keys.py config_keys.dat config_keys.h
#
# It checks what the C compiler cannot: the keys in alphabetical order and
# each once, the fields each type needs and no others, an int's default
# within its bounds, an enum's default among its choices. (config.c still
# parses every default at start, which proves each against its type's rule.)
#
# SPDX-License-Identifier: Apache-2.0
import ast
import re
import sys

# .dat type -> config.c's key_type_t (bool is an enum of false, true).
TYPES = {
    'string': 'KT_STRING', 'conninfo': 'KT_CONNINFO', 'slot': 'KT_SLOT', 'ident': 'KT_IDENT',
    'table': 'KT_TABLE', 'column': 'KT_COLUMN', 'columns': 'KT_COLUMNS',
    'template': 'KT_TEMPLATE', 'topic': 'KT_TOPIC', 'int': 'KT_INT', 'enum': 'KT_ENUM',
    'bool': 'KT_ENUM', 'listen': 'KT_LISTEN',
}
REQUIRED = {'name', 'type', 'default', 'desc'}
BY_TYPE = {'int': {'min', 'max', 'unit'}, 'enum': {'choices'}}
OPTIONAL = {'secret'}


def cstr(s):
    """A C string literal; the .dat is plain ASCII, so only \\ and " need escaping."""
    return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'


def check(keys):
    """The problems found, one message each, naming the key."""
    problems = []
    prev = None
    for k in keys:
        name = k.get('name', '?') if isinstance(k, dict) else '?'
        def bad(msg):
            problems.append('%s: %s' % (name, msg))
        if not isinstance(k, dict):
            bad('not a dict')
            continue
        t = k.get('type')
        allowed = REQUIRED | OPTIONAL | BY_TYPE.get(t, set())
        for f in sorted(REQUIRED - k.keys()):
            bad('no %s' % f)
        for f in sorted(BY_TYPE.get(t, set()) - k.keys()):
            bad('a %s key needs %s' % (t, f))
        for f in sorted(k.keys() - allowed):
            bad('%s does not apply to a %s key' % (f, t))
        if (REQUIRED | BY_TYPE.get(t, set())) - k.keys():
            continue
        if t not in TYPES:
            bad('unknown type %r' % t)
            continue
        if not re.fullmatch(r'[a-z][a-z0-9_]*(\.[a-z0-9_]+)*', name) or name.startswith('kafka.'):
            bad('not a key name (kafka.* keys are librdkafka properties, not in the table)')
        if prev is not None and name <= prev:
            bad('not after %s: the table is in alphabetical order, each key once' % prev)
        prev = name
        for f in ('name', 'desc', 'unit'):
            v = k.get(f, '')
            if not isinstance(v, str) or not all(' ' <= c <= '~' for c in v):
                bad('%s must be one line of printable ASCII' % f)
        d = k['default']
        if t == 'int':
            if type(d) is not int or type(k['min']) is not int or type(k['max']) is not int:
                bad('default, min and max must be integers')
            elif not k['min'] <= d <= k['max']:
                bad('default %d is not within [%d, %d]' % (d, k['min'], k['max']))
        elif t == 'bool':
            if type(d) is not bool:
                bad('a bool default is True or False')
        elif not isinstance(d, str):
            bad('default must be a string')
        elif t == 'enum' and d not in k['choices']:
            bad('default %r is not one of its choices' % d)
        if 'secret' in k and k['secret'] is not True:
            bad('secret is True or absent')
    return problems


def c_value(k):
    d = k['default']
    if k['type'] == 'bool':
        return 'false' if d is False else 'true'
    return str(d)


def render(keys, dat):
    out = ['/* Generated from %s by gen_config_keys.py: edit that file, not this one. */' % dat,
           '',
           'static const char *const booleans[] = {"false", "true", NULL};']
    choices = {}
    for k in keys:
        if k['type'] == 'enum':
            var = 'choices_' + k['name'].replace('.', '_')
            choices[k['name']] = var
            out.append('static const char *const %s[] = {%s, NULL};'
                       % (var, ', '.join(cstr(c) for c in k['choices'])))
    out += ['', 'static const key_def_t keys[] = {']
    for k in keys:
        fields = ['.name = ' + cstr(k['name']), '.type = ' + TYPES[k['type']],
                  '.def = ' + cstr(c_value(k))]
        if k['type'] == 'int':
            fields += ['.min = INT64_C(%d)' % k['min'], '.max = INT64_C(%d)' % k['max'],
                       '.unit = ' + cstr(k['unit'])]
        if k['type'] == 'bool':
            fields.append('.choices = booleans')
        elif k['type'] == 'enum':
            fields.append('.choices = ' + choices[k['name']])
        if k.get('secret'):
            fields.append('.flags = KF_SECRET')
        fields.append('.desc = ' + cstr(k['desc']))
        out.append('        {' + ',\n         '.join(fields) + '},')
    out.append('};')
    return '\n'.join(out) + '\n'


def main(argv):
    if len(argv) != 3:
        sys.exit('usage: gen_config_keys.py config_keys.dat OUTPUT')
    dat, output = argv[1], argv[2]
    with open(dat, encoding='ascii') as f:
        try:
            keys = ast.literal_eval(f.read())
        except (SyntaxError, ValueError) as e:
            sys.exit('%s: not a Python literal: %s' % (dat, e))
    if not isinstance(keys, list) or not keys:
        sys.exit('%s: must hold a non-empty list of keys' % dat)
    problems = check(keys)
    if problems:
        sys.exit('\n'.join('%s: %s' % (dat, p) for p in problems))
    text = render(keys, dat.split('/')[-1])
    with open(output, 'w', encoding='ascii') as f:
        f.write(text)


if __name__ == '__main__':
    main(sys.argv)

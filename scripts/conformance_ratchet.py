#!/usr/bin/env python3
"""Compare a conformance run with conformance/pass-list.txt (the ratchet).

allot does not pass all of OpenStack Placement's gabbi suite yet, so
"every test passes" cannot be the CI gate. Instead conformance/pass-list.txt
records every test that has passed once, one line each:

    file.yaml :: test name

and a run fails only when one of those tests no longer passes (a
regression). Tests that pass but are not listed yet are reported as new
passes; ``--update`` rewrites the list with the current passes, so the list
grows as the server grows and is reviewed in the git diff like code.

Input is the JSON written by conformance/runner/run --json. A test's key
is its YAML file and its ``name``; upstream repeats a few names within one
file (usage-secure-rbac.yaml), so the n-th repeat (n >= 2) of a name gets
`` (#n)`` appended, in file order. Outcomes are bucketed like the runner:
pass/xfail = passed, skip = skipped, anything else = failed.

With ``--partial`` (scripts/conformance sets it for --only/--skip) files
that were not run are left alone: their entries are neither regressions
nor dropped by --update. Without it an entry for a file that is missing
from the run counts as a regression.

Standard library only. Exit status: 0 no regression (or --update), 1
regressions, 2 bad input.
"""

import argparse
import collections
import json
import os
import sys

SEP = ' :: '
DEFAULT_HEADER = ['# conformance pass list: see scripts/conformance_ratchet.py', '']


def die(message):
    print('conformance: error: ' + message, file=sys.stderr)
    sys.exit(2)


def bucket(outcome):
    if outcome in ('pass', 'xfail'):
        return 'passed'
    if outcome == 'skip':
        return 'skipped'
    return 'failed'


def one_line(message, limit=160):
    lines = [ln.strip() for ln in (message or '').splitlines() if ln.strip()]
    if not lines:
        return ''
    # A traceback's useful line is its last one.
    return (lines[-1] if lines[0].startswith('Traceback') else lines[0])[:limit]


def load_results(path):
    """Return ({key: test record}, {file: record}) from the runner's JSON."""
    try:
        with open(path, encoding='utf-8') as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as exc:
        die('cannot read results %s: %s' % (path, exc))
    if doc.get('summary', {}).get('interrupted'):
        die('the run was interrupted; not comparing')
    tests, files = {}, {}
    for rec in doc['files']:
        files[rec['file']] = rec
        seen = collections.Counter()
        for test in sorted(rec['tests'], key=lambda t: t['index']):
            name = ' '.join(str(test['name']).split())
            seen[name] += 1
            if seen[name] > 1:
                name += ' (#%d)' % seen[name]
            tests[rec['file'] + SEP + name] = test
    return tests, files


def load_pass_list(path):
    """Return (header comment lines, set of entries)."""
    header, entries, in_header = [], set(), True
    if not os.path.exists(path):
        return list(DEFAULT_HEADER), entries
    with open(path, encoding='utf-8') as fh:
        for number, raw in enumerate(fh, 1):
            line = raw.rstrip('\n')
            if in_header and (line.startswith('#') or not line.strip()):
                header.append(line)
                continue
            in_header = False
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if SEP not in line:
                die('%s:%d: expected "file.yaml :: test name", got %r'
                    % (path, number, line))
            entries.add(line)
    while header and not header[-1].strip():
        header.pop()
    return header + [''], entries


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('results', help='JSON from run --json')
    parser.add_argument('pass_list', help='conformance/pass-list.txt')
    parser.add_argument('--update', action='store_true',
                        help='rewrite the pass list with the current passes')
    parser.add_argument('--partial', action='store_true',
                        help='only some files were run (--only/--skip)')
    args = parser.parse_args()

    tests, files = load_results(args.results)
    header, listed = load_pass_list(args.pass_list)
    passing = {key for key, t in tests.items() if bucket(t['outcome']) == 'passed'}

    def file_of(entry):
        return entry.split(SEP, 1)[0]

    if args.partial:
        checked = {e for e in listed if file_of(e) in files}
    else:
        checked = listed
    regressions = sorted(checked - passing)
    new = sorted(passing - listed)

    # Per-file table.
    per_file = collections.defaultdict(collections.Counter)
    for entry in regressions:
        per_file[file_of(entry)]['regressed'] += 1
    for entry in new:
        per_file[file_of(entry)]['new'] += 1
    names = sorted(set(files) | set(per_file))
    width = max([len(n) for n in names] + [len('total')])
    row = '%-*s %7s %7s %8s %10s %5s'
    print()
    print(row % (width, 'file', 'passed', 'failed', 'skipped', 'regressed', 'new'))
    totals = collections.Counter()
    for name in names:
        rec = files.get(name, {})
        counts = {k: rec.get(k, 0) for k in ('passed', 'failed', 'skipped')}
        counts.update(per_file[name])
        totals.update(counts)
        note = '' if name in files else '  (not run)'
        print(row % (width, name, counts['passed'], counts['failed'],
                     counts['skipped'], counts.get('regressed', 0),
                     counts.get('new', 0)) + note)
    print(row % (width, 'total', totals['passed'], totals['failed'],
                 totals['skipped'], totals['regressed'], totals['new']))

    if new:
        print('\nnew passes (not in %s yet):' % args.pass_list)
        for entry in new:
            print('  + ' + entry)
    if regressions:
        print('\nREGRESSIONS (in %s, did not pass):' % args.pass_list)
        for entry in regressions:
            test = tests.get(entry)
            if test is None:
                why = ('no such test in this run' if file_of(entry) in files
                       else 'file not run')
            else:
                why = '%s: %s' % (test['outcome'], one_line(test.get('message')))
            print('  - %s    [%s]' % (entry, why))

    status = 0
    if args.update:
        kept = {e for e in listed if args.partial and file_of(e) not in files}
        entries = sorted(kept | passing)
        tmp = args.pass_list + '.tmp'
        with open(tmp, 'w', encoding='utf-8') as fh:
            fh.write('\n'.join(header + entries) + '\n')
        os.replace(tmp, args.pass_list)
        print('\nconformance: wrote %s: %d entries (%d added, %d dropped)'
              % (args.pass_list, len(entries), len(new), len(regressions)))
    elif regressions:
        print('\nconformance: FAILED: %d regression(s) against %s'
              % (len(regressions), args.pass_list))
        status = 1
    elif new:
        print('\nconformance: ok; record the %d new pass(es) with '
              'scripts/conformance --update' % len(new))
    else:
        print('\nconformance: ok, pass list unchanged')

    run_totals = {k: sum(rec[k] for rec in files.values())
                  for k in ('passed', 'failed', 'skipped')}
    print('conformance: %(passed)d passed, %(failed)d failed, '
          '%(skipped)d skipped' % run_totals)
    return status


if __name__ == '__main__':
    sys.exit(main())

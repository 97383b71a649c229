"""Normal forms of answers, so that only differences that matter show.

- errors: the status, and `errors[0].code` from microversion 1.23;
- success: the status and the JSON body with every list sorted (Placement
  promises no order anywhere we compare), integral floats written as ints
  (16.0 == 16), `last-modified` and request ids ignored (headers are not
  compared at all);
- allocation candidates: `allocation_requests` as a sorted list of canonical
  JSON strings (a multiset), `mappings` lists sorted; `provider_summaries` as
  a dict.
"""

import difflib
import json


def minor(version):
    return int(version.split('.')[1])


def canon(x):
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, dict):
        return {k: canon(v) for k, v in x.items()}
    if isinstance(x, list):
        items = [canon(v) for v in x]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    return x


def dumps(x):
    return json.dumps(x, sort_keys=True)


def normalize(call, resp):
    rep = {'status': resp.status}
    if resp.status >= 400:
        if minor(call.version) >= 23:
            code = None
            body = resp.body
            if isinstance(body, dict):
                errs = body.get('errors')
                if isinstance(errs, list) and errs and isinstance(errs[0],
                                                                  dict):
                    code = errs[0].get('code')
            rep['code'] = code
        return rep
    body = resp.body
    if body is None:
        if resp.text.strip():
            rep['text'] = resp.text
        return rep
    path = call.path.split('?')[0]
    if path == '/allocation_candidates' and isinstance(body, dict):
        body = dict(body)
        reqs = body.get('allocation_requests')
        if isinstance(reqs, list):
            body['allocation_requests'] = sorted(
                dumps(canon(r)) for r in reqs)
    rep['body'] = canon(body)
    return rep


def same(rep_a, rep_b):
    return dumps(rep_a) == dumps(rep_b)


def pretty(rep):
    """Lines for a diff: allocation requests one per line."""
    body = rep.get('body')
    if isinstance(body, dict) and 'allocation_requests' in body:
        lines = ['status %s' % rep['status'], 'allocation_requests (%d):'
                 % len(body['allocation_requests'])]
        lines += ['  ' + r for r in body['allocation_requests']]
        rest = {k: v for k, v in body.items() if k != 'allocation_requests'}
        lines += json.dumps(rest, indent=1, sort_keys=True).splitlines()
        return lines
    return json.dumps(rep, indent=1, sort_keys=True).splitlines()


def diff(rep_a, rep_b, label_a, label_b, limit=80):
    lines = list(difflib.unified_diff(pretty(rep_a), pretty(rep_b),
                                      label_a, label_b, lineterm='', n=2))
    if len(lines) > limit:
        lines = lines[:limit] + ['... (%d more diff lines)'
                                 % (len(lines) - limit)]
    return lines


def signature(call, rep_a, rep_b):
    """What kind of mismatch this is, to group repeats of one cause."""
    path = call.path.split('?')[0]
    parts = [p if not _looks_variable(p) else '*' for p in path.split('/')]
    params = sorted({kv.split('=')[0].rstrip('0123456789').split('_')[0]
                     for kv in call.path.partition('?')[2].split('&') if kv})
    if rep_a['status'] != rep_b['status'] or rep_a.get('code') != rep_b.get(
            'code'):
        what = 'status %s/%s %s/%s' % (rep_a['status'], rep_b['status'],
                                       rep_a.get('code'), rep_b.get('code'))
    else:
        what = 'body'
        a, b = rep_a.get('body'), rep_b.get('body')
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(k for k in set(a) | set(b)
                          if dumps(a.get(k)) != dumps(b.get(k)))
            what = 'body ' + ','.join(keys)
    return '%s %s [%s] %s' % (call.method, '/'.join(parts), ','.join(params),
                              what)


def _looks_variable(seg):
    return len(seg) == 36 and seg.count('-') == 4 or seg.startswith('CUSTOM_')

"""Normal forms of answers, so that only differences that matter show.

- errors: the status and, when the answer is Placement's error envelope
  (`{"errors": [{"status", "title", "detail", ...}]}`), `errors[0].code`
  (Placement sends it from microversion 1.23 on; an envelope without one
  has no code, so a code on one side only differs); an error answer that
  is not an envelope is marked as such, so it differs from one that is;
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
        error = envelope_error(resp.body)
        if error is None:
            rep['envelope'] = False
        elif 'code' in error:
            rep['code'] = error['code']
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


def envelope_error(body):
    """`errors[0]` when `body` is Placement's error envelope, else None."""
    if not isinstance(body, dict):
        return None
    errs = body.get('errors')
    if not (isinstance(errs, list) and errs and isinstance(errs[0], dict)):
        return None
    return errs[0]


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
    params = sorted({kv.split('=')[0].rstrip('0123456789').split('_')[0]
                     for kv in call.path.partition('?')[2].split('&') if kv})
    if rep_a['status'] != rep_b['status'] or rep_a['status'] >= 400:
        what = 'status %s/%s %s/%s' % (rep_a['status'], rep_b['status'],
                                       error_kind(rep_a), error_kind(rep_b))
    else:
        what = 'body'
        a, b = rep_a.get('body'), rep_b.get('body')
        if isinstance(a, dict) and isinstance(b, dict):
            keys = sorted(k for k in set(a) | set(b)
                          if dumps(a.get(k)) != dumps(b.get(k)))
            what = 'body ' + ','.join(keys)
    return '%s %s [%s] %s' % (call.method, shape(call.path),
                              ','.join(params), what)


def error_kind(rep):
    """An error answer's code for a report: the code, `-` for an envelope
    without one, `not-an-envelope`; None for a success."""
    if rep['status'] < 400:
        return None
    if rep.get('envelope') is False:
        return 'not-an-envelope'
    return rep.get('code', '-')


def shape(path):
    """The path without its query, uuids and CUSTOM_ names written `*`."""
    parts = path.split('?')[0].split('/')
    return '/'.join('*' if _looks_variable(p) else p for p in parts)


def _looks_variable(seg):
    return len(seg) == 36 and seg.count('-') == 4 or seg.startswith('CUSTOM_')


def limit_problem(limit, version, rep_a, rep_b, full_a, full_b):
    """What is wrong with allot's answer `rep_b` to an allocation candidates
    query with `limit=N`, by Placement's own contract for `limit`, or None.

    `full_a`, `full_b` are Placement's and allot's answers to the same query
    without `limit`. Which N candidates Placement returns is its internal
    order (or random, with `randomize_allocation_candidates`), so the
    limited answers are not compared with each other. allot's must be: N
    candidates of its own full answer (all of them when there are no more);
    Placement's count when the full answers agree; the full answer's
    provider summaries, and when the answer was cut only those of the trees
    of the returned candidates (`limit_results()` in
    objects/research_context.py), below 1.29 only those of the returned
    candidates' providers (docs/api.md, "Differences").
    """
    agreed = same(full_a, full_b)
    if rep_b['status'] != 200 or full_b['status'] != 200:
        # An error: the same as Placement's when the full answers agree,
        # else the same as allot's own without limit.
        other, whose = (rep_a, 'Placement') if agreed else (
            full_b, 'allot without limit')
        return None if same(rep_b, other) else (
            'status: %s where %s answers %s' % (
                error_kind(rep_b) or rep_b['status'], whose,
                error_kind(other) or other['status']))
    if agreed and rep_a['status'] != 200:
        return 'status: 200 where Placement answers %s' % rep_a['status']
    got, full = rep_b['body'], full_b['body']
    if sorted(got) != sorted(full):
        return 'keys: %s, without limit %s' % (sorted(got), sorted(full))
    reqs, all_reqs = got['allocation_requests'], full['allocation_requests']
    want = min(limit, len(all_reqs))
    if len(reqs) != want:
        return 'count: %d candidates, not min(limit %d, %d in all) = %d' % (
            len(reqs), limit, len(all_reqs), want)
    if agreed and len(rep_a['body']['allocation_requests']) != len(reqs):
        return 'count: %d candidates where Placement returns %d' % (
            len(reqs), len(rep_a['body']['allocation_requests']))
    rest = list(all_reqs)
    for r in reqs:
        if r not in rest:
            return ('subset: a candidate that the answer without limit does '
                    'not have (or not as often): %s' % r)
        rest.remove(r)
    sums = full['provider_summaries']
    if len(reqs) < len(all_reqs):
        used = set()
        for r in reqs:
            used |= set(json.loads(r)['allocations'])
        if int(version.split('.')[1]) >= 29:
            roots = {sums[u]['root_provider_uuid'] for u in used if u in sums}
            sums = {u: s for u, s in sums.items()
                    if s['root_provider_uuid'] in roots}
        else:
            sums = {u: s for u, s in sums.items() if u in used}
    elif agreed and not same(rep_a, rep_b):
        return 'nothing cut, yet the answer differs from Placement\'s'
    if dumps(got['provider_summaries']) != dumps(sums):
        return ('summaries: %s where the returned candidates call for %s'
                % (sorted(got['provider_summaries']), sorted(sums)))
    return None

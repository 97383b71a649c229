#!/usr/bin/env python3
"""Randomized differential test: the real OpenStack Placement against allot.

Both servers get the same random world through the HTTP API, then the same
random queries and write sequences; their normalized answers must agree.
See README.md beside this file. Stdlib only; the real Placement runs from the
venv that scripts/differential makes.
"""

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
import uuid as uuidlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the work tree

import allowed  # noqa: E402
import normalize  # noqa: E402
import queries  # noqa: E402
from servers import Response, Server, ServerDied  # noqa: E402
from world import CGEN, GEN, Call, World  # noqa: E402
from world_sharing import SharingWorld  # noqa: E402

DEFAULT_SEED = 1
# The mends of placement_patched.py that change what a write does (the others
# change allocation candidates only).
WRITE_MENDS = frozenset({'consumers'})

# The whole world is compared status by status while it is being built, so a
# divergence there is reported on the call that diverged.


class Pair:
    """The reference (always the real Placement) and the server under test."""

    def __init__(self, a, b):
        self.a = a
        self.b = b
        self.died = False

    def send(self, server, call):
        body = resolve(server, call.body)
        resp = server.request(call.method, call.path, body, call.version)
        return resp, body

    def run(self, call):
        """Send `call` to both; their normal forms, and the body sent to A.
        A server that dies is restarted (on a fresh database) and its answer
        is {'status': 'died'}; `self.died` tells the caller."""
        reps = []
        body_a = None
        for server in (self.a, self.b):
            try:
                resp, body = self.send(server, call)
                reps.append(normalize.normalize(call, resp))
            except ServerDied as e:
                print('differential: %s died on %s %s: %s'
                      % (server.label, call.method, call.path, e), flush=True)
                self.died = True
                reps.append({'status': 'died'})
                body = None
                server.restart(keep=True)
            if server is self.a:
                body_a = body
        return reps[0], reps[1], body_a

    def reset(self):
        for server in (self.a, self.b):
            reset(server)


def resolve(server, body):
    """Replace GEN/CGEN placeholders with this server's current values."""
    if isinstance(body, dict):
        return {k: resolve(server, v) for k, v in body.items()}
    if isinstance(body, list):
        return [resolve(server, v) for v in body]
    if isinstance(body, str):
        if body.startswith(GEN):
            r = server.request('GET', '/resource_providers/' + body[len(GEN):],
                               None, '1.14')
            if r.status == 200 and isinstance(r.body, dict):
                return r.body.get('generation', 0)
            return 0
        if body.startswith(CGEN):
            r = server.request('GET', '/allocations/' + body[len(CGEN):],
                               None, '1.28')
            if r.status == 200 and isinstance(r.body, dict):
                return r.body.get('consumer_generation')
            return None
    return body


def reset(server):
    """Empty a server through the API; restart it on a fresh database if
    anything is left."""
    try:
        r = server.request('GET', '/resource_providers', None, '1.14')
        provs = r.body.get('resource_providers', []) if r.status == 200 else []
        consumers = set()
        for p in provs:
            r = server.request('GET', '/resource_providers/%s/allocations'
                               % p['uuid'], None, '1.0')
            if r.status == 200:
                consumers |= set(r.body.get('allocations', {}))
        for c in sorted(consumers):
            server.request('DELETE', '/allocations/' + c, None, '1.0')
        depth = {}
        by_uuid = {p['uuid']: p for p in provs}

        def d(u):
            if u not in depth:
                parent = by_uuid.get(u, {}).get('parent_provider_uuid')
                depth[u] = 0 if not parent or parent not in by_uuid else (
                    d(parent) + 1)
            return depth[u]
        for p in sorted(provs, key=lambda p: -d(p['uuid'])):
            server.request('DELETE', '/resource_providers/' + p['uuid'], None,
                           '1.0')
        r = server.request('GET', '/traits?name=startswith:CUSTOM_', None,
                           '1.6')
        if r.status == 200:
            for t in r.body.get('traits', []):
                server.request('DELETE', '/traits/' + t, None, '1.6')
        r = server.request('GET', '/resource_classes', None, '1.2')
        if r.status == 200:
            for rc in r.body.get('resource_classes', []):
                if rc['name'].startswith('CUSTOM_'):
                    server.request('DELETE', '/resource_classes/' + rc['name'],
                                   None, '1.2')
        r1 = server.request('GET', '/resource_providers', None, '1.14')
        r2 = server.request('GET', '/traits?name=startswith:CUSTOM_', None,
                            '1.6')
        r3 = server.request('GET', '/resource_classes', None, '1.2')
        clean = (r1.status == 200 and not r1.body['resource_providers']
                 and r2.status == 200 and not r2.body['traits']
                 and r3.status == 200 and not any(
                     rc['name'].startswith('CUSTOM_')
                     for rc in r3.body['resource_classes']))
    except (ServerDied, OSError, KeyError, AttributeError, TypeError):
        clean = False
    if not clean:
        server.restart()


UUID_RE = re.compile(
    r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')


class UuidMap:
    """A consistent renaming of uuids, and its inverse."""

    def __init__(self, attempt):
        self.rng = random.Random('replay:%d' % attempt)
        self.fwd = {}
        self.inv = {}

    def _new(self, m):
        old = m.group(0)
        if old not in self.fwd:
            new = str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))
            self.fwd[old] = new
            self.inv[new] = old
        return self.fwd[old]

    def _sub(self, x, fn):
        if isinstance(x, dict):
            return {self._sub(k, fn): self._sub(v, fn) for k, v in x.items()}
        if isinstance(x, list):
            return [self._sub(v, fn) for v in x]
        if isinstance(x, str):
            return UUID_RE.sub(fn, x)
        return x

    def call(self, call):
        return Call(call.method, self._sub(call.path, self._new),
                    self._sub(call.body, self._new), call.version, call.kind)

    def back(self, x):
        return self._sub(x, lambda m: self.inv.get(m.group(0), m.group(0)))


class Failure:
    def __init__(self, seed, world, family, history, final, rep_a, rep_b,
                 bodies, problem=None, notes=()):
        self.seed = seed
        self.world = world
        self.family = family
        self.history = list(history)  # [(Call, resolved body on A, status)]
        self.final = final
        self.final_body = bodies
        self.rep_a = rep_a
        self.rep_b = rep_b
        # A broken rule other than "the same normal form" (a limited answer).
        self.problem = problem
        self.sig = normalize.signature(final, rep_a, rep_b)
        if problem:
            self.sig += ' (limit: %s)' % problem.split(':')[0]
        self.count = 1
        # Why no allowed.py entry let it pass (entries of its request class
        # whose evidence did not hold).
        self.notes = list(notes)


class Runner:
    def __init__(self, args, pair, workroot):
        self.args = args
        self.pair = pair
        self.workroot = workroot
        self.passed = 0
        self.failed = 0
        self.failures = {}  # signature -> Failure (first of its kind)
        self.order = []
        self.per_family = {}
        self.trace = open(args.trace, 'w') if args.trace else None
        self.attempt = 0
        self.allowed = {}  # (entry name, evidence, signature) -> count
        self.mended = None  # the evidence server, started when first needed
        # What the evidence server holds: (world id, mend of its writes, the
        # calls replayed so far, the UuidMap they were renamed with).
        self.mended_world = None
        self.wid = None
        self.evidence_spent = 0.0  # seconds of evidence replays so far

    def tally(self, family, ok):
        fam = self.per_family.setdefault(family, [0, 0])
        if ok:
            self.passed += 1
            fam[0] += 1
        else:
            self.failed += 1
            fam[1] += 1

    def record(self, family, wid, history, call, rep_a, rep_b, body,
               problem=None, notes=()):
        f = Failure(self.args.seed, wid, family, history, call, rep_a, rep_b,
                    body, problem, notes)
        if f.sig in self.failures:
            self.failures[f.sig].count += 1
        else:
            self.failures[f.sig] = f
            self.order.append(f.sig)
            if self.args.verbose:
                print('  mismatch: %s' % f.sig, flush=True)

    def log(self, wid, family, call, ok, rep_a, t0):
        if self.trace:
            self.trace.write(json.dumps({
                'world': wid, 'family': family, 'ok': ok,
                'call': '%s %s @%s' % (call.method, call.path, call.version),
                'status': rep_a['status'], 'code': rep_a.get('code'),
                'size': size(rep_a),
                'ms': int((time.monotonic() - t0) * 1000)}) + '\n')

    def compare(self, family, wid, history, call):
        """Send `call` to both and judge the answers: (ok, excused, rep_a,
        rep_b, body sent to A); `excused` when they differ and an allowed.py
        entry's evidence holds for this answer."""
        t0 = time.monotonic()
        rep_a, rep_b, body = self.pair.run(call)
        self.query_form(wid, history, call)
        ok = normalize.same(rep_a, rep_b)
        excused = False
        notes = []
        if not ok and not self.pair.died:
            entry, notes = self.explain(history, call, rep_a, rep_b)
            if entry is not None:
                ok = excused = True
                key = (entry.name, ' '.join(entry.evidence),
                       normalize.signature(call, rep_a, rep_b))
                self.allowed[key] = self.allowed.get(key, 0) + 1
        self.tally(family, ok)
        self.log(wid, family, call, ok, rep_a, t0)
        if not ok:
            self.record(family, wid, history, call, rep_a, rep_b, body,
                        notes=notes)
        return ok, excused, rep_a, rep_b, body

    # allot's query forms (docs/api.md, "Query forms for long requests"): the
    # listing GETs' parameters in a JSON body, answered byte for byte as the GET.
    QUERY_FORMS = {'/allocation_candidates': '/allocation_candidates/query',
                   '/resource_providers': '/resource_providers/query'}

    def query_form(self, wid, history, call):
        """After a listing GET was compared: the same query sent to B (allot)
        as a GET and in its query form; their status and bytes must be equal,
        request ids aside (family `query-forms`)."""
        path, _, query = call.path.partition('?')
        form = self.QUERY_FORMS.get(path)
        if call.method != 'GET' or form is None or self.pair.died:
            return
        try:
            pairs = urllib.parse.parse_qsl(query, keep_blank_values=True,
                                           strict_parsing=bool(query),
                                           errors='strict')
        except (ValueError, UnicodeDecodeError):
            return  # no JSON body can say a query that is not UTF-8
        body = {}
        for key, value in pairs:
            body.setdefault(key, []).append(value)
        got = self.pair.b.request('GET', call.path, None, call.version)
        posted = self.pair.b.request('POST', form, body, call.version)
        def blank(text):
            return re.sub(r'req-[0-9a-f-]{36}', 'req-', text)

        def rep(r):
            return {'status': r.status, 'body': r.body}
        ok = ((got.status, blank(got.text))
              == (posted.status, blank(posted.text)))
        self.tally('query-forms', ok)
        if not ok:
            self.record('query-forms', wid, history, call, rep(got),
                        rep(posted), body,
                        problem='query form: the POST answered otherwise')

    def compare_limited(self, family, wid, history, call, limit, full_a,
                        full_b):
        """`call`, a candidates query with `limit`, after the same query
        without it was compared and answered `full_a`, `full_b`: the limited
        answer judged by Placement's contract for `limit`
        (normalize.limit_problem)."""
        t0 = time.monotonic()
        rep_a, rep_b, body = self.pair.run(call)
        problem = normalize.limit_problem(limit, call.version, rep_a, rep_b,
                                          full_a, full_b)
        self.tally(family, problem is None)
        self.log(wid, family, call, problem is None, rep_a, t0)
        if problem:
            self.record(family, wid, history, call, rep_a, rep_b, body,
                        problem=problem)

    # -- evidence for allowed.py ------------------------------------------

    def explain(self, history, call, rep_a, rep_b):
        """The allowed.py entries whose evidence holds for allot's answer
        `rep_b` to `call` after `history` (one, or the mended ones of its
        class together when only their mends at once explain it), or None;
        and, for a report, why the entries of its request class did not."""
        notes = []
        if self.args.against != 'allot':
            return None, notes
        entries = allowed.candidates_for(call, rep_a, rep_b)
        if entries:
            # Known bugs can meet in one answer: after each mend alone, all
            # the mends for this request at once.
            mends = allowed.mended_for(call)
            if len(mends) > 1:
                entries.insert(sum(e.evidence[0] == 'mended'
                                   for e in entries), allowed.together(mends))
        for entry in entries:
            if self.evidence_spent > self.args.evidence_time:
                notes.append('%s: not checked, the --evidence-time of %ss '
                             'is spent' % (entry.name, self.args.evidence_time))
                break
            t0 = time.monotonic()
            try:
                if entry.evidence[0] == 'mended':
                    got = self.witness(history, call, entry.evidence[1])
                    if got is not None and normalize.same(got, rep_b):
                        return entry, notes
                    notes.append('%s: the Placement with the %s mend answers '
                                 '%s' % (entry.name, entry.evidence[1],
                                         'otherwise' if got else
                                         'the world differently'))
                elif entry.evidence[0] == 'order':
                    if self.order_evidence(history, call, rep_b):
                        return entry, notes
                    notes.append('%s: no other creation order makes '
                                 'Placement answer as allot does'
                                 % entry.name)
            except ServerDied as e:
                notes.append('%s: the evidence server died: %s'
                             % (entry.name, e))
                self.mended = self.mended_world = None
            finally:
                self.evidence_spent += time.monotonic() - t0
        return None, notes

    def witness(self, history, final, mend='', order=None):
        """The normal form of a second Placement's answer to `final` after
        the calls of `history` (reordered to `order`, a list of its indices,
        when given), with the mend `mend` of placement_patched.py; None when
        any call of the replay is answered with another status than in
        `history` (then it is not the same world).

        The server keeps the world it was last given: a later question on
        the same world (and the same mend of writes) replays only the calls
        added since. Only the `consumers` mend changes what a write does;
        the others change allocation candidates alone, so they are sent
        with `final` only.
        """
        if self.mended is None or self.mended.proc is None:
            self.mended = Server('placement', 'placement-mended',
                                 self.workroot,
                                 placement_venv=self.args.placement_venv,
                                 placement_patch='')
            self.mended.start()
            self.mended_world = None
        server = self.mended
        mends = set(filter(None, mend.split(',')))
        writes = ','.join(sorted(mends & WRITE_MENDS))
        steps = history if order is None else [history[i] for i in order]
        held = self.mended_world
        if (order is None and held is not None and held[0] == self.wid
                and held[1] == writes and len(held[2]) <= len(steps)
                and all(a is b for a, b in zip(held[2], steps))):
            done, fwd = held[2], held[3]
        else:
            # A fresh database, not an emptied one: Placement's answers can
            # depend on its internal ids, which then count from 1 again.
            server.restart()
            self.attempt += 1
            done, fwd = [], UuidMap(self.attempt)
        self.mended_world = None
        extra = {'x-allot-placement-patches': writes}
        for step in steps[len(done):]:
            call, _, status = step
            c = fwd.call(call)
            resp = server.request(c.method, c.path, resolve(server, c.body),
                                  c.version, extra)
            if resp.status != status:
                return None
            done = done + [step]
        if order is None:
            self.mended_world = (self.wid, writes, done, fwd)
        c = fwd.call(final)
        resp = server.request(c.method, c.path, resolve(server, c.body),
                              c.version, {'x-allot-placement-patches': mend})
        if c.method != 'GET':
            self.mended_world = None  # a write changed what it holds
        # Named back before the normal form, which sorts by those names.
        return normalize.normalize(final, Response(
            resp.status, fwd.back(resp.body), fwd.back(resp.text)))

    def order_evidence(self, history, final, rep_b):
        """Whether the stock Placement answers `final` as allot did (`rep_b`)
        when the providers of `history` are created in another order
        (parents still first; every other call after them, in its order):
        then allot's answer is one Placement gives for the same world."""
        creates = [i for i, (c, _, _) in enumerate(history)
                   if c.method == 'POST' and c.path == '/resource_providers'
                   and isinstance(c.body, dict)]
        if len(creates) < 2:
            return False
        known = {history[i][0].body.get('uuid') for i in creates}

        def topo(seq):
            """`seq` reordered so that parents still come first."""
            out, placed = [], set()
            pending = list(seq)
            while pending:
                for i in pending:
                    body = history[i][0].body
                    parent = body.get('parent_provider_uuid')
                    if parent not in known or parent in placed:
                        out.append(i)
                        placed.add(body.get('uuid'))
                        pending.remove(i)
                        break
                else:
                    return None
            return out

        rng = random.Random('order-check')
        orders = [topo(list(reversed(creates)))]
        for _ in range(4):
            shuffled = list(creates)
            rng.shuffle(shuffled)
            orders.append(topo(shuffled))
        rest = [i for i in range(len(history)) if i not in set(creates)]
        tried = set()
        for order in orders:
            if order is None or order == creates or tuple(order) in tried:
                continue
            tried.add(tuple(order))
            got = self.witness(history, final, '', order + rest)
            if got is not None and normalize.same(got, rep_b):
                return True
        return False

    def world(self, wid):
        args = self.args
        self.wid = wid
        rng = random.Random('%d:%d' % (args.seed, wid))
        shape = SharingWorld if args.worlds == 'sharing' else World
        world = shape(rng, allocations=args.world_allocations).build()
        history = []
        for call in world.calls:
            ok, excused, rep_a, _, body = self.compare('setup', wid, history,
                                                       call)
            history.append((call, body, rep_a['status']))
            if not ok or excused or self.pair.died:
                return  # the worlds differ from here on: abandon this one
        qrng = random.Random('%d:%d:queries' % (args.seed, wid))
        # Which candidate queries get a `limit`, from a stream of its own so
        # that the queries themselves stay those of the seed.
        lrng = random.Random('%d:%d:limit' % (args.seed, wid))
        gens = {
            'providers': lambda: queries.providers_query(qrng, world),
            'usages': lambda: queries.usages_query(qrng, world),
            'candidates': lambda: queries.candidates_query(qrng, world),
        }
        if args.worlds == 'sharing':
            gens['candidates'] = lambda: queries.sharing_candidates_query(
                qrng, world)
        fams = [f for f in args.families if f in gens]
        for _ in range(args.queries if fams else 0):
            fam = qrng.choice(fams)
            if args.worlds == 'sharing' and 'candidates' in fams and (
                    qrng.random() < 0.75):
                fam = 'candidates'  # what these worlds are for
            call = gens[fam]()
            if (fam == 'usages' and not args.usage_allocations
                    and 'allocations' in call.path):
                continue
            _, _, rep_a, rep_b, _ = self.compare(fam, wid, history, call)
            if self.pair.died:
                return
            n = size(rep_b) if fam == 'candidates' else None
            if n and lrng.random() < args.limit_share:
                limit, limited = queries.with_limit(lrng, call, n)
                if limited is not None:
                    self.compare_limited(fam, wid, history, limited, limit,
                                         rep_a, rep_b)
                    if self.pair.died:
                        return
        if 'writes' not in args.families:
            return
        for _ in range(args.writes):
            seq = queries.write_sequence(qrng, world, args.world_allocations)
            for call in seq:
                ok, excused, rep_a, _, body = self.compare('writes', wid,
                                                           history, call)
                history.append((call, body, rep_a['status']))
                if not ok or excused:
                    return
            for call in queries.state_queries(
                    world, args.world_allocations,
                    'usages' in args.families or args.usage_allocations):
                ok, _, _, _, _ = self.compare('writes', wid, history, call)
                if not ok or self.pair.died:
                    return

    # -- shrinking --------------------------------------------------------

    def reproduces(self, f, calls, final):
        """Replay `calls` on emptied servers; the replay if they agree on
        every call and `final` still mismatches the same way, else None.

        Every uuid is replaced by a fresh one for the replay: emptying a
        server through the API leaves records the API cannot delete
        (consumers, projects, users), which must not meet the replay.
        """
        self.pair.reset()
        self.attempt += 1
        fwd = UuidMap(self.attempt)
        executed = []
        for call in calls:
            rep_a, rep_b, body = self.pair.run(fwd.call(call))
            if not normalize.same(rep_a, rep_b):
                return None
            executed.append((call, fwd.back(body), rep_a['status']))
        rep_a, rep_b, body = self.pair.run(fwd.call(final))
        if normalize.same(rep_a, rep_b):
            return None
        if normalize.signature(final, rep_a, rep_b) != f.sig:
            return None
        return (executed, final, fwd.back(rep_a), fwd.back(rep_b),
                fwd.back(body))

    def shrink(self, f, deadline):
        calls = [c for c, _, _ in f.history]
        final = f.final
        best = self.reproduces(f, calls, final)
        if best is None:
            return None  # not reproducible from scratch (ordering? state?)
        # Calls that were refused usually changed nothing: try without them
        # all at once, then without each kind of call at once.
        statuses = {id(c): s for c, _, s in f.history}
        groups = [lambda c: statuses.get(id(c), 200) >= 400,
                  lambda c: c.path.startswith('/allocations'),
                  lambda c: c.path.endswith('/aggregates'),
                  lambda c: c.path.endswith('/traits'),
                  lambda c: c.path.startswith('/traits/')
                  or c.path.startswith('/resource_classes')]
        for drop in groups:
            if time.monotonic() >= deadline:
                break
            trial = [c for c in calls if not drop(c)]
            if len(trial) == len(calls):
                continue
            got = self.reproduces(f, trial, final)
            if got is not None:
                calls, best = trial, got
        n = 2
        while len(calls) >= 1 and time.monotonic() < deadline:
            chunk = max(1, len(calls) // n)
            removed_any = False
            i = 0
            while i < len(calls) and time.monotonic() < deadline:
                trial = calls[:i] + calls[i + chunk:]
                got = self.reproduces(f, trial, final)
                if got is not None:
                    calls, best = trial, got
                    removed_any = True
                else:
                    i += chunk
            if chunk == 1 and not removed_any:
                break
            if not removed_any:
                n = min(len(calls), n * 2)
        # Drop query parameters that do not matter.
        if final.method == 'GET' and '?' in final.path:
            path, _, query = final.path.partition('?')
            params = query.split('&')
            i = 0
            while i < len(params) and time.monotonic() < deadline:
                trial = params[:i] + params[i + 1:]
                fc = Call('GET', path + ('?' + '&'.join(trial) if trial
                                         else ''), None, final.version,
                          final.kind)
                got = self.reproduces(f, calls, fc)
                if got is not None:
                    params, final, best = trial, fc, got
                else:
                    i += 1
        return best

    # -- report -----------------------------------------------------------

    def report(self, out):
        args = self.args
        a, b = self.pair.a.label, self.pair.b.label
        deadline = time.monotonic() + args.shrink_time
        for k, sig in enumerate(self.order[:args.max_reports]):
            f = self.failures[sig]
            executed, final = f.history, f.final
            rep_a, rep_b, body = f.rep_a, f.rep_b, f.final_body
            note = 'not minimized'
            if f.problem:
                # A limited answer may differ from Placement's and still be
                # right, so "the same mismatch" cannot guide a shrink.
                note = 'not minimized: a limit check'
            elif args.shrink_time > 0 and time.monotonic() < deadline:
                per = max(5.0, (deadline - time.monotonic())
                          / max(1, min(len(self.order), args.max_reports) - k))
                try:
                    got = self.shrink(f, min(deadline, time.monotonic() + per))
                except ServerDied as e:
                    got = None
                    print('  (shrinking stopped: %s)' % e, file=out)
                    self.pair.a.restart()
                    self.pair.b.restart()
                if got is not None:
                    note = 'minimized from %d calls' % len(f.history)
                    executed, final, rep_a, rep_b, body = got
                else:
                    note = 'not reproduced from an empty start; full history'
            print('', file=out)
            print('=== mismatch %d/%d [%s] x%d: %s' % (
                k + 1, len(self.order), f.family, f.count, sig), file=out)
            print('seed %d, world %d; rerun: scripts/differential --seed %d '
                  '--world %d --iterations 1 --against %s --only %s '
                  '--queries %d --writes %d --allocations %s --worlds %s'
                  % (f.seed, f.world, f.seed, f.world, args.against,
                     ','.join(args.families), args.queries, args.writes,
                     'on' if args.world_allocations else 'off', args.worlds),
                  file=out)
            print('calls before the query (%s), as sent to %s:'
                  % (note, a), file=out)
            for call, sent, status in executed:
                print('  ' + fmt_call(call, sent) + '  -> %s' % status,
                      file=out)
            print('the call that differs:', file=out)
            print('  ' + fmt_call(final, body), file=out)
            print('%s: %s   %s: %s' % (a, short(rep_a), b, short(rep_b)),
                  file=out)
            if f.problem:
                print('%s breaks the contract of limit: %s' % (b, f.problem),
                      file=out)
            for line in normalize.diff(rep_a, rep_b, a, b):
                print('  ' + line, file=out)
            for line in f.notes:
                print('not allowed: ' + line, file=out)
        if len(self.order) > args.max_reports:
            print('\n... and %d more kinds of mismatch:' % (
                len(self.order) - args.max_reports), file=out)
            for sig in self.order[args.max_reports:]:
                f = self.failures[sig]
                print('  x%d %s' % (f.count, sig), file=out)


def size(rep):
    body = rep.get('body')
    if isinstance(body, dict):
        for key in ('allocation_requests', 'resource_providers', 'usages',
                    'allocations', 'inventories', 'traits', 'aggregates'):
            if key in body:
                return len(body[key])
    return None


def fmt_call(call, body):
    s = '%s %s  [placement %s]' % (call.method, call.path, call.version)
    if body is not None:
        s += '  ' + json.dumps(body, sort_keys=True)
    return s


def short(rep):
    s = str(rep['status'])
    if 'code' in rep:
        s += ' ' + str(rep['code'])
    if rep.get('envelope') is False:
        s += ' (not an error envelope)'
    return s


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--seed', type=int, default=DEFAULT_SEED)
    p.add_argument('--iterations', type=int, default=None,
                   help='worlds to build (default 10; with --duration, '
                   'unbounded)')
    p.add_argument('--duration', type=float, default=None,
                   help='stop starting new worlds after S seconds')
    p.add_argument('--worlds', choices=['small', 'sharing'], default='small',
                   help='world shape: small (default, what CI runs) or '
                   'sharing (40-70 providers, nested sharing providers, '
                   're-parenting; mostly candidate queries)')
    p.add_argument('--world', type=int, default=0,
                   help='index of the first world (to rerun one)')
    p.add_argument('--queries', type=int, default=40,
                   help='random queries per world')
    p.add_argument('--writes', type=int, default=2,
                   help='write sequences per world')
    p.add_argument('--only', default=','.join(queries.FAMILIES),
                   help='comma list of families (default: all of them, '
                   '%s)' % ','.join(queries.FAMILIES))
    p.add_argument('--allocations', choices=['on', 'off'], default='on',
                   help='allocations in worlds and writes (default on)')
    p.add_argument('--limit-share', type=float, default=0.6,
                   help='share of candidate queries with candidates that are '
                   'asked again with a limit (default 0.6)')
    p.add_argument('--against', choices=['allot', 'placement'],
                   default='allot', help='the server under test (placement: '
                   'a second real Placement, a self-test of the harness)')
    p.add_argument('--placement-venv', required=True)
    p.add_argument('--placement-patch', default=None,
                   help='diagnosis only: mend these known bugs of the '
                   'reference Placement (comma list of anchors, summaries, '
                   'amounts, consumers; see placement_patched.py)')
    p.add_argument('--allot-bin')
    p.add_argument('--shrink-time', type=float, default=300,
                   help='seconds in all to minimize reproductions')
    p.add_argument('--max-reports', type=int, default=8)
    p.add_argument('--strict', action='store_true',
                   help='every difference fails unless an allowed.py entry\'s '
                   'evidence holds for it; this is the only mode (there is no '
                   'lenient one any more), the flag is kept so that CI says '
                   'it')
    p.add_argument('--evidence-time', type=float, default=300,
                   help='seconds in all to gather evidence for allowed.py '
                   'entries (replays on a mended Placement); a difference '
                   'left unchecked when they are spent fails')
    p.add_argument('--workdir', help='where server databases and logs go')
    p.add_argument('--keep-workdir', action='store_true')
    p.add_argument('--trace', help='write every compared call, one JSON '
                   'line each, to this file')
    p.add_argument('-v', '--verbose', action='store_true')
    args = p.parse_args(argv)
    if args.iterations is None:
        args.iterations = 10 if args.duration is None else 10 ** 9
    return args


def main(argv):
    args = parse_args(argv)
    started = time.monotonic()
    workroot = args.workdir or tempfile.mkdtemp(prefix='allot-differential-')
    os.makedirs(workroot, exist_ok=True)
    a = Server('placement', 'placement', workroot,
               placement_venv=args.placement_venv,
               placement_patch=args.placement_patch)
    runner = None
    if args.against == 'allot':
        b = Server('allot', 'allot', workroot, allot_bin=args.allot_bin)
    else:
        b = Server('placement', 'placement-2', workroot,
                   placement_venv=args.placement_venv)
    status = 1
    try:
        a.start()
        b.start()
        print('differential: %s on :%d, %s on :%d (started in %.1fs), seed %d'
              % (a.label, a.port, b.label, b.port, time.monotonic() - started,
                 args.seed), flush=True)
        pair = Pair(a, b)
        args.world_allocations = args.allocations == 'on'
        args.usage_allocations = args.world_allocations
        fams = [f.strip() for f in args.only.split(',') if f.strip()]
        bad = [f for f in fams if f not in queries.FAMILIES]
        if bad:
            print('differential: unknown family %s' % ', '.join(bad),
                  file=sys.stderr)
            return 2
        args.families = fams
        print('differential: families %s; allocations in worlds: %s'
              % (','.join(fams), 'yes' if args.world_allocations else 'no'),
              flush=True)
        runner = Runner(args, pair, workroot)
        wid = args.world
        done = 0
        while done < args.iterations:
            if (args.duration is not None
                    and time.monotonic() - started > args.duration):
                break
            if done:
                pair.reset()
            pair.died = False
            before = (runner.passed, runner.failed)
            t0 = time.monotonic()
            runner.world(wid)
            if args.verbose:
                print('world %d: %d passed, %d failed, %.1fs' % (
                    wid, runner.passed - before[0], runner.failed - before[1],
                    time.monotonic() - t0), flush=True)
            wid += 1
            done += 1
        print('differential: %d worlds in %.1fs (%d requests to %s, %d to %s)'
              % (done, time.monotonic() - started, a.requests, a.label,
                 b.requests, b.label), flush=True)
        fam_line = ', '.join('%s %d/%d' % (k, v[0], v[0] + v[1])
                             for k, v in sorted(runner.per_family.items()))
        print('differential: agreed per family: %s' % fam_line)
        if runner.allowed:
            print('differential: %d difference(s) passed through '
                  'tests/differential/allowed.py, each with its evidence:'
                  % sum(runner.allowed.values()))
            for (name, evidence, sig), count in sorted(
                    runner.allowed.items()):
                print('  x%d %s: %s (%s)' % (count, sig, name, evidence))
        if runner.failed:
            runner.report(sys.stdout)
        failed = runner.failed
        status = 1 if failed else 0
        if failed:
            print('differential: server logs in %s' % workroot)
            args.keep_workdir = True
        print('differential: %d passed, %d failed'
              % (runner.passed, failed), flush=True)
    except ServerDied as e:
        print('differential: server failure: %s' % e, file=sys.stderr)
        print('differential: 0 passed, 1 failed')
        args.keep_workdir = True
        status = 1
    finally:
        a.stop()
        b.stop()
        if runner is not None and runner.mended is not None:
            runner.mended.stop()
        if not args.keep_workdir and not args.workdir:
            shutil.rmtree(workroot, ignore_errors=True)
    return status


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

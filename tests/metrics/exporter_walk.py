"""What openstack-exporter's Placement exporter asks of an endpoint for one scrape,
timed: `GET /resource_providers`, then for every provider its inventories, usages
and allocations (three GETs each), `--concurrency` at a time as the exporter's
errgroup does. Run by scripts/bench-scrape against Placement and against allot, to
set beside allot's own `/metrics` (docs/performance.md, "Metrics").

    python3 exporter_walk.py URL [--concurrency N] [--token admin]

Prints `walk: N requests in S s (R/s)`; exit status 1 if any answer was not 200.
"""

import argparse
import concurrent.futures
import http.client
import json
import sys
import threading
import time
import urllib.parse

local = threading.local()


def get(base, path, token):
    conn = getattr(local, 'conn', None)
    if conn is None:
        u = urllib.parse.urlsplit(base)
        conn = local.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    conn.request('GET', path, headers={
        'x-auth-token': token, 'openstack-api-version': 'placement 1.14',
        'accept': 'application/json'})
    r = conn.getresponse()
    body = r.read()
    return r.status, body


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument('url')
    p.add_argument('--concurrency', type=int, default=8)
    p.add_argument('--token', default='admin')
    args = p.parse_args(argv)
    started = time.monotonic()
    status, body = get(args.url, '/resource_providers', args.token)
    if status != 200:
        print('walk: /resource_providers answered %d' % status)
        return 1
    uuids = [rp['uuid'] for rp in json.loads(body)['resource_providers']]
    paths = ['/resource_providers/%s/%s' % (u, what)
             for u in uuids for what in ('inventories', 'usages', 'allocations')]
    bad = 0
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        for status, _ in pool.map(lambda path: get(args.url, path, args.token), paths):
            bad += status != 200
    took = time.monotonic() - started
    n = len(paths) + 1
    print('walk: %d requests (%d providers) in %.1f s (%.0f/s), %d not 200'
          % (n, len(uuids), took, n / took, bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

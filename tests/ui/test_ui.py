"""The web UI (issue 26) in a real browser: headless Chromium (Debian's
`chromium`, /usr/bin/chromium) driven by Playwright, against the release binary.
Run by scripts/ui-test.

    python test_ui.py ALLOT_BIN [--screenshots DIR] [--flat-db PATH]

It seeds a small cloud through the API (a compute node with two NUMA children, a
sharing disk pool in its aggregate, two plain hosts, allocations, a pending claim
with a tag, a refused claim), then in the browser: is refused without a login (sent
to the login page, no data), logs in (the session cookie is HttpOnly and
SameSite=Strict), finds the compute node by name in the providers list, checks that
the width of its VCPU and MEMORY_MB usage bars' segments match what the API reports
(`/inventories`, `/usages`, `/pending`), sees the pending claim with its tag and a
countdown that runs, visits every view, logs out, and no page logs a console error.

With `--flat-db PATH` (a database `scripts/synth-db --shape flat --roots 10000`
made) it also times the overview there: the navigation's time to the load event,
the median of five, must be under one second.

With `--postgres URL` (a PostgreSQL server's admin URL, ALLOT_TEST_POSTGRES_URL) it
also runs three nodes on a fresh database there (issue 46): a login through the first
keeps working through the other two and across the first's restart, and a logout
through the second ends the session on all three.

With `--screenshots DIR` it saves each view at 1440x900 (docs/ui/).

Prints `ui: N passed, N failed` last; exit status 1 if anything failed.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid as uuidlib

from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("ALLOT_UI_CHROMIUM", "/usr/bin/chromium")
# Headless, and nothing that reaches out on its own (the machine has no network).
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1440, "height": 900}

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok: %s" % what, flush=True)
    else:
        failed += 1
        print("FAIL: %s" % what, flush=True)
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base, method, path, body=None, token="admin"):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={
        "x-auth-token": token, "openstack-api-version": "placement latest",
        "content-type": "application/json", "accept": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def serve(allot, database):
    port = free_port()
    proc = subprocess.Popen(
        [allot, "serve", "--database", "sqlite:%s" % database,
         "--bind", "127.0.0.1:%d" % port],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    for _ in range(200):
        try:
            urllib.request.urlopen(base + "/").read()
            return proc, base
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("allot did not start")


def seed(base):
    """A small cloud; the names and uuids the checks look for."""
    ids = {}
    agg = str(uuidlib.uuid4())

    def provider(name, parent=None, inventories=None, traits=None, aggregates=None):
        u = str(uuidlib.uuid4())
        body = {"name": name, "uuid": u}
        if parent:
            body["parent_provider_uuid"] = ids[parent]
        status, out = call(base, "POST", "/resource_providers", body)
        assert status == 200, out
        ids[name] = u
        gen = 0
        if inventories:
            status, out = call(base, "PUT", "/resource_providers/%s/inventories" % u,
                               {"resource_provider_generation": gen,
                                "inventories": inventories})
            assert status == 200, out
            gen = out["resource_provider_generation"]
        if traits:
            for t in traits:
                if t.startswith("CUSTOM_"):
                    call(base, "PUT", "/traits/%s" % t)
            status, out = call(base, "PUT", "/resource_providers/%s/traits" % u,
                               {"resource_provider_generation": gen, "traits": traits})
            assert status == 200, out
            gen = out["resource_provider_generation"]
        if aggregates:
            status, out = call(base, "PUT", "/resource_providers/%s/aggregates" % u,
                               {"resource_provider_generation": gen,
                                "aggregates": aggregates})
            assert status == 200, out
        return u

    provider("compute-7", inventories={
        "VCPU": {"total": 64, "allocation_ratio": 4.0},
        "MEMORY_MB": {"total": 524288, "reserved": 8192, "allocation_ratio": 1.0}},
        traits=["HW_CPU_X86_AVX2", "CUSTOM_RACK_A1"], aggregates=[agg])
    provider("compute-7-numa0", parent="compute-7", inventories={
        "PCPU": {"total": 16}})
    provider("compute-7-numa1", parent="compute-7", inventories={
        "PCPU": {"total": 16}})
    provider("disk-pool-1", inventories={"DISK_GB": {"total": 20480, "reserved": 512}},
             traits=["MISC_SHARES_VIA_AGGREGATE"], aggregates=[agg])
    for i, rack in [(8, "CUSTOM_RACK_A1"), (9, "CUSTOM_RACK_B2")]:
        provider("compute-%d" % i, inventories={
            "VCPU": {"total": 32, "allocation_ratio": 2.0},
            "MEMORY_MB": {"total": 262144, "reserved": 4096}},
            traits=[rack])
    # Allocations: three instances on compute-7, one on compute-8.
    for n, (host, vcpu, mem) in enumerate([("compute-7", 8, 16384), ("compute-7", 16, 65536),
                                           ("compute-7", 4, 8192), ("compute-8", 24, 131072)]):
        consumer = str(uuidlib.uuid4())
        ids["instance-%d" % n] = consumer
        status, out = call(base, "PUT", "/allocations/%s" % consumer, {
            "allocations": {ids[host]: {"resources": {"VCPU": vcpu, "MEMORY_MB": mem}},
                            ids["disk-pool-1"]: {"resources": {"DISK_GB": 40}}},
            "project_id": "p1", "user_id": "u1", "consumer_generation": None,
            "consumer_type": "INSTANCE"})
        assert status == 204, out
    # A pending claim with its tag, and one refused (it does not fit).
    consumer = str(uuidlib.uuid4())
    ids["claimer"] = consumer
    status, out = call(base, "POST", "/claims", {
        "consumer_uuid": consumer, "project_id": "p1", "user_id": "u1",
        "allocations": {ids["compute-7"]: {"resources": {"VCPU": 6, "MEMORY_MB": 12288}}},
        "expires_in": 600, "tag": "boot-request-42"})
    assert status == 201, out
    ids["claim"] = out["uuid"]
    status, out = call(base, "POST", "/claims", {
        "consumer_uuid": str(uuidlib.uuid4()), "project_id": "p1", "user_id": "u1",
        "allocations": {ids["compute-9"]: {"resources": {"VCPU": 1000}}},
        "expires_in": 600, "tag": "too-big"})
    assert status == 409, out
    return ids


def launch(p, profile):
    return p.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
        viewport=VIEWPORT)


def bar_shares(page, selector):
    """The used and pending segments' widths as shares of the bar's."""
    return page.eval_on_selector(selector, """bar => {
        const w = bar.getBoundingClientRect().width;
        const part = c => bar.querySelector('.seg.' + c).getBoundingClientRect().width / w;
        return {used: part('used'), pending: part('pending'), width: w};
    }""")


def browse(allot, shots):
    work = tempfile.mkdtemp(prefix="allot-ui-")
    proc, base = serve(allot, os.path.join(work, "a.db"))
    errors = []
    try:
        ids = seed(base)
        rp = ids["compute-7"]
        with sync_playwright() as p:
            ctx = launch(p, os.path.join(work, "profile"))
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.on("console", lambda m: m.type == "error" and errors.append(
                "%s: %s" % (page.url, m.text)))
            page.on("pageerror", lambda e: errors.append("%s: %s" % (page.url, e)))

            # Refused without a login: sent to the login page, shown nothing.
            for path in ["/ui", "/ui/providers/%s" % rp, "/ui/claims"]:
                page.goto(base + path)
                check("/ui/login" in page.url and "compute-7" not in page.content()
                      and "boot-request-42" not in page.content(),
                      "without a login %s goes to the login page (%s)" % (path, page.url))
            if shots:
                page.screenshot(path=os.path.join(shots, "login.png"))

            # Log in (noauth2 on loopback: the token is the user).
            page.fill("input[name=token]", "admin")
            page.click("button[type=submit]")
            page.wait_for_load_state()
            check(page.url.endswith("/ui/claims"), "the login returns to the page asked for")
            cookie = [c for c in ctx.cookies() if c["name"] == "allot_ui"]
            check(len(cookie) == 1 and cookie[0]["httpOnly"]
                  and cookie[0]["sameSite"] == "Strict" and cookie[0]["path"] == "/ui",
                  "the session cookie is HttpOnly, SameSite=Strict, Path=/ui: %s" % cookie)
            check(page.evaluate("document.cookie") == "", "no script reads the cookie")

            # The overview.
            page.goto(base + "/ui")
            check(page.locator("h1").first.inner_text() == "Capacity", "the overview")
            mem = page.locator("table.classes tr[data-class=MEMORY_MB]").inner_text()
            check("GiB" in mem, "memory in GiB on the overview: %r" % mem)
            refused = page.locator("table.refusals").inner_text()
            check("pending" in refused and "409" in refused,
                  "the refused claim is among those refused recently")
            if shots:
                page.screenshot(path=os.path.join(shots, "overview.png"), full_page=True)

            # Find the compute node by name.
            page.goto(base + "/ui/providers")
            page.fill("input[name=q]", "compute-7")
            page.click("form.search button")
            page.wait_for_load_state()
            rows = page.locator("table.providers tbody tr")
            check(rows.count() == 3, "the search finds compute-7 and its two children")
            if shots:
                page.screenshot(path=os.path.join(shots, "providers.png"), full_page=True)
            page.click("table.providers a:text-is('compute-7')")
            page.wait_for_load_state()
            check(page.url.endswith("/ui/providers/%s" % rp), "to the provider's page")

            # Its bars are the API's numbers.
            _, inv = call(base, "GET", "/resource_providers/%s/inventories" % rp)
            _, use = call(base, "GET", "/resource_providers/%s/usages" % rp)
            _, pend = call(base, "GET", "/resource_providers/%s/pending" % rp)
            for cls in ["VCPU", "MEMORY_MB"]:
                i = inv["inventories"][cls]
                capacity = int((i["total"] - i["reserved"]) * i["allocation_ratio"])
                whole = capacity + i["reserved"]
                want_used = use["usages"][cls] / whole
                want_pending = pend["pending"].get(cls, 0) / whole
                got = bar_shares(page, "table.usage tr[data-class=%s] .bar" % cls)
                tolerance = 1.5 / got["width"]  # a pixel and a half of rounding
                check(abs(got["used"] - want_used) <= tolerance
                      and abs(got["pending"] - want_pending) <= tolerance,
                      "%s bar: used %.4f (API %.4f), pending %.4f (API %.4f)" % (
                          cls, got["used"], want_used, got["pending"], want_pending))
            body = page.content()
            check("HW_CPU_X86_AVX2" in body and "CUSTOM_RACK_A1" in body, "its traits")
            check("disk-pool-1" in body, "the sharing provider of its aggregate")
            check("compute-7-numa0" in body and "compute-7-numa1" in body, "its tree")

            # The pending claim: its tag, and a countdown that runs.
            claim = page.locator("tr.claim[data-claim='%s']" % ids["claim"])
            check(claim.count() == 1 and "boot-request-42" in claim.inner_text(),
                  "the pending claim with its tag")
            countdown = claim.locator("time.countdown")
            first = countdown.inner_text()
            check(re.fullmatch(r"in (9m \d+s|10m 0s)", first) is not None,
                  "the claim expires in about ten minutes: %r" % first)
            page.wait_for_timeout(2100)
            check(countdown.inner_text() != first, "the countdown runs (%r, then %r)" % (
                first, countdown.inner_text()))
            if shots:
                page.screenshot(path=os.path.join(shots, "provider.png"), full_page=True)

            # The claims and consumer views, and headroom.
            page.goto(base + "/ui/claims")
            check("boot-request-42" in page.locator("table.claims").inner_text(),
                  "the claims page lists the claim with its tag")
            if shots:
                page.screenshot(path=os.path.join(shots, "claims.png"), full_page=True)
            page.goto(base + "/ui/consumers/%s" % ids["instance-1"])
            check("compute-7" in page.content() and "64 GiB" in page.content(),
                  "a consumer's allocations, memory in GiB")
            if shots:
                page.screenshot(path=os.path.join(shots, "consumer.png"), full_page=True)
            page.goto(base + "/ui/headroom")
            page.fill("input[name=resources]", "VCPU:4,MEMORY_MB:8192")
            page.select_option("select[name=group_by]", "trait")
            page.fill("input[name=prefix]", "CUSTOM_RACK_")
            page.click("form.headroom button")
            page.wait_for_load_state()
            status, want = call(base, "GET",
                                "/headroom?resources=VCPU:4,MEMORY_MB:8192"
                                "&group_by=trait:CUSTOM_RACK_")
            got = page.locator("p.answer .big").inner_text().replace(",", "")
            check(status == 200 and got == str(want["headroom"]),
                  "headroom as the API counts it (%s, API %s)" % (got, want))
            groups = page.locator("table.groups").inner_text()
            check(all(k in groups for k in want["groups"]), "headroom per rack")
            if shots:
                page.screenshot(path=os.path.join(shots, "headroom.png"), full_page=True)

            # Log out: the session is over.
            page.click("header form button")
            page.wait_for_load_state()
            check("/ui/login" in page.url, "logged out")
            page.goto(base + "/ui")
            check("/ui/login" in page.url, "after the logout, no page")
            ctx.close()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)
    check(not errors, "no console errors: %s" % errors)


def serve_pg(allot, url, port=None):
    """A node on the PostgreSQL database `url`, on `port` (a free one if None)."""
    port = port or free_port()
    proc = subprocess.Popen(
        [allot, "serve", "--database", url, "--bind", "127.0.0.1:%d" % port],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    for _ in range(300):
        try:
            urllib.request.urlopen(base + "/").read()
            return proc, base, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("allot did not start on %s" % url)


def stop(proc):
    proc.terminate()
    proc.wait()


def logged_in(page, base, what):
    """Whether a page of `base` opens with the browser's session (not the login)."""
    page.goto(base + "/ui/providers")
    ok = "/ui/login" not in page.url and "compute-7" in page.content()
    return check(ok, what + " (%s)" % page.url)


def three_nodes(allot, admin_url):
    """Issue 46: three nodes on one PostgreSQL database, as behind a load balancer
    (cookies are the host's, whatever the port, so the browser sends the session to
    every node): a login through node 1 keeps working through nodes 2 and 3 and
    across a restart of node 1; a logout through node 2 ends it on all three."""
    name = "allot_ui_%s" % uuidlib.uuid4().hex
    subprocess.run(["psql", admin_url, "-qc", "CREATE DATABASE %s" % name], check=True,
                   stdout=subprocess.DEVNULL)
    base_url, _, query = admin_url.partition("?")
    url = base_url.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
    work = tempfile.mkdtemp(prefix="allot-ui-nodes-")
    nodes = [serve_pg(allot, url) for _ in range(3)]
    try:
        bases = [base for _, base, _ in nodes]
        seed(bases[0])
        with sync_playwright() as p:
            ctx = launch(p, os.path.join(work, "profile"))
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.goto(bases[0] + "/ui/login")
            page.fill("input[name=token]", "admin")
            page.click("button[type=submit]")
            page.wait_for_load_state()
            for n, base in enumerate(bases):
                logged_in(page, base, "the session made on node 1 holds on node %d" % (n + 1))
            proc, _, port = nodes[0]
            stop(proc)
            nodes[0] = serve_pg(allot, url, port)
            logged_in(page, bases[0], "the session holds on node 1 after its restart")
            page.goto(bases[1] + "/ui")
            page.click("header form button")
            page.wait_for_load_state()
            check("/ui/login" in page.url, "logged out through node 2")
            for n, base in enumerate(bases):
                gone = False
                for _ in range(30):
                    page.goto(base + "/ui/providers")
                    if "/ui/login" in page.url:
                        gone = True
                        break
                    time.sleep(0.1)
                check(gone, "after the logout on node 2, no page on node %d" % (n + 1))
            ctx.close()
    finally:
        for proc, _, _ in nodes:
            stop(proc)
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run(["psql", admin_url, "-qc", "DROP DATABASE IF EXISTS %s" % name],
                       stdout=subprocess.DEVNULL)


def time_overview(allot, database, shots):
    """The overview's time to render at the size of `database` (flat 10,000 roots)."""
    work = tempfile.mkdtemp(prefix="allot-ui-flat-")
    copy = os.path.join(work, "flat.db")
    shutil.copy(database, copy)
    proc, base = serve(allot, copy)
    try:
        with sync_playwright() as p:
            ctx = launch(p, os.path.join(work, "profile"))
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            page.goto(base + "/ui/login")
            page.fill("input[name=token]", "admin")
            page.click("button[type=submit]")
            page.wait_for_load_state()
            times = []
            for _ in range(5):
                page.goto(base + "/ui")
                nav = page.evaluate(
                    "JSON.stringify(performance.getEntriesByType('navigation')[0])")
                nav = json.loads(nav)
                times.append(nav["loadEventEnd"] - nav["startTime"])
            roots = page.locator("section.cards .card").nth(1).inner_text()
            median = statistics.median(times)
            print("ui: overview at %s: median %.0f ms to the load event (runs: %s)" % (
                roots.replace("\n", " "), median, ", ".join("%.0f" % t for t in times)))
            check(median < 1000, "the overview renders in under 1 s (%.0f ms)" % median)
            if shots:
                page.screenshot(path=os.path.join(shots, "overview-flat-10000.png"))
            page.goto(base + "/ui/providers?q=&page=100")
            check(page.locator("table.providers tbody tr").count() == 50,
                  "the long list is paged (50 a page)")
            ctx.close()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("allot")
    ap.add_argument("--screenshots")
    ap.add_argument("--flat-db")
    ap.add_argument("--postgres", help="a PostgreSQL server's admin URL: three nodes")
    args = ap.parse_args()
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
    browse(args.allot, args.screenshots)
    if args.postgres:
        three_nodes(args.allot, args.postgres)
    if args.flat_db:
        time_overview(args.allot, args.flat_db, args.screenshots)
    print("ui: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

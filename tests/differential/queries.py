"""Random queries and write sequences aimed at a World.

Each generator returns `Call`s. Microversions are drawn at random from the
range where the chosen parameters exist and, now and then, below it (both
servers must then refuse alike).
"""

from urllib.parse import quote

from world import CGEN, GEN, Call, valid_inventory

FAMILIES = ('providers', 'usages', 'candidates', 'writes')

# Placement's project and user of consumers written before 1.8 without them.
INCOMPLETE = '00000000-0000-0000-0000-000000000000'


def qs(params):
    """A query string; ':' ',' '!' stay readable (Placement decodes them)."""
    if not params:
        return ''
    return '?' + '&'.join('%s=%s' % (k, quote(str(v), safe=':,!'))
                          for k, v in params)


def mv(rng, lo, hi=39, below=0.06):
    """A microversion 1.x with lo <= x <= hi, or now and then one below lo."""
    if lo > 0 and rng.random() < below:
        return '1.%d' % rng.randint(max(0, lo - 5), lo - 1)
    return '1.%d' % rng.randint(lo, hi)


def pick(rng, seq, k=None):
    seq = list(seq)
    if not seq:
        return []
    if k is None:
        k = rng.randint(1, min(3, len(seq)))
    return rng.sample(seq, min(k, len(seq)))


# -- shared pieces --------------------------------------------------------

def amount_for(rng, world, rc):
    invs = [p.inv[rc] for p in world.providers if rc in p.inv]
    if not invs or rng.random() < 0.05:
        return rng.choice([1, 1, 2, 1000000])
    inv = rng.choice(invs)
    step = inv['step_size']
    cands = [n for n in range(max(1, inv['min_unit']), inv['max_unit'] + 1)
             if n % step == 0][:4]
    r = rng.random()
    if r < 0.1:
        return inv['max_unit'] + step
    if r < 0.15:
        return max(1, inv['min_unit'] - 1)
    return rng.choice(cands) if cands else 1


def aimed(rng, world, nested=True):
    """(provider, rc, amount) picks from one tree (and its sharing
    providers) with amounts that fit an empty inventory: requests aimed at
    something that exists, so that answers are not all empty."""
    roots = [r for r in world.roots() if not r.sharing] or world.roots()
    if not roots:
        return []
    root = rng.choice(roots)
    provs = world.tree(root.uuid) if nested else [root]
    pool = [(p, rc) for p in provs + world.sharing_for(root.uuid)
            for rc in sorted(p.inv)]
    out = []
    seen = set()
    for p, rc in pick(rng, pool, rng.randint(1, 3)):
        if rc in seen:
            continue
        seen.add(rc)
        inv = p.inv[rc]
        cap = int((inv['total'] - inv['reserved']) * inv['allocation_ratio'])
        step = inv['step_size']
        hi = min(inv['max_unit'], cap)
        cands = [n for n in range(max(1, inv['min_unit']), hi + 1)
                 if n % step == 0][:3]
        out.append((p, rc, rng.choice(cands) if cands else 1))
    return out


def aimed_resources(rng, world):
    picks = aimed(rng, world)
    merged = {}
    for _, rc, n in picks:
        merged[rc] = merged.get(rc, 0) + n
    if not merged:
        return resources_param(rng, world)
    return ','.join('%s:%d' % kv for kv in merged.items())


def aimed_traits(rng, world, picks, any_ok):
    have = set()
    for p, _, _ in picks:
        have |= p.traits
    if not have or rng.random() < 0.3:
        return traits_expr(rng, world, 39, any_ok=any_ok)
    t = rng.choice(sorted(have))
    others = [x for x in world.traits() if x not in have]
    if others and rng.random() < 0.4:
        return t + ',!' + rng.choice(others)
    if any_ok and others and rng.random() < 0.3:
        return 'in:%s,%s' % (t, rng.choice(others))
    return t


def resources_param(rng, world, k=None, classes=None):
    classes = classes or world.classes()
    if not classes or rng.random() < 0.03:
        classes = ['VCPU', 'CUSTOM_NOPE_%s' % world.tag]
    rcs = pick(rng, classes, k)
    return ','.join('%s:%d' % (rc, amount_for(rng, world, rc)) for rc in rcs)


def traits_expr(rng, world, minor, forbid_ok=True, any_ok=True):
    """A `required` value: plain, with '!' (1.22), or 'in:' (1.39)."""
    traits = world.traits()
    r = rng.random()
    if any_ok and r < 0.25:
        return 'in:' + ','.join(pick(rng, traits, rng.randint(1, 3)))
    out = []
    for t in pick(rng, traits, rng.randint(1, 2)):
        if forbid_ok and rng.random() < 0.35:
            out.append('!' + t)
        else:
            out.append(t)
    if rng.random() < 0.03:
        out.append('CUSTOM_UNKNOWN_%s' % world.tag)
    return ','.join(out)


def member_of_expr(rng, world, forbid_ok=True):
    aggs = world.aggs + ([world.uuid()] if rng.random() < 0.1 else [])
    r = rng.random()
    if r < 0.35:
        return rng.choice(aggs)
    if r < 0.65:
        return 'in:' + ','.join(pick(rng, aggs))
    if forbid_ok and r < 0.85:
        return '!' + rng.choice(aggs)
    if forbid_ok:
        return '!in:' + ','.join(pick(rng, aggs))
    return rng.choice(aggs)


def some_provider(rng, world):
    if not world.providers or rng.random() < 0.03:
        return world.uuid()
    return rng.choice(world.providers).uuid


def q(path, version):
    return Call('GET', path, None, version, 'query')


# -- providers ------------------------------------------------------------

def providers_query(rng, world):
    r = rng.random()
    if r < 0.5:
        return provider_list_query(rng, world)
    u = some_provider(rng, world)
    base = '/resource_providers/' + u
    choices = [
        lambda: q(base, mv(rng, 0)),
        lambda: q(base + '/inventories', mv(rng, 0)),
        lambda: q(base + '/inventories/' + rng.choice(
            world.classes() + ['VCPU', 'DISK_GB']), mv(rng, 0)),
        lambda: q(base + '/aggregates', mv(rng, 1)),
        lambda: q(base + '/traits', mv(rng, 6)),
        lambda: q('/traits' + qs(rng.choice([
            [], [('associated', 'true')], [('associated', 'false')],
            [('name', 'startswith:CUSTOM_')],
            [('name', 'in:' + ','.join(pick(rng, world.traits())))],
            [('name', 'startswith:HW_NUMA'), ('associated', 'true')]])),
            mv(rng, 6)),
        lambda: q('/resource_classes', mv(rng, 2)),
        lambda: q('/resource_classes/' + rng.choice(
            world.custom_rcs + ['VCPU', 'CUSTOM_NOPE']), mv(rng, 2)),
    ]
    return rng.choice(choices)()


def provider_list_query(rng, world):
    params = []
    need = 0
    n = rng.choice([0, 1, 1, 2, 2, 3])
    kinds = rng.sample(['name', 'uuid', 'member_of', 'in_tree', 'resources',
                        'required'], n)
    for kind in kinds:
        if kind == 'name':
            params.append(('name', rng.choice(
                [p.name for p in world.providers] + ['nope'])))
        elif kind == 'uuid':
            params.append(('uuid', some_provider(rng, world)))
        elif kind == 'member_of':
            need = max(need, 3)
            count = 1 if rng.random() < 0.7 else 2
            for _ in range(count):
                expr = member_of_expr(rng, world)
                if expr.startswith('!'):
                    need = max(need, 32)
                params.append(('member_of', expr))
            if count > 1:
                need = max(need, 24)
        elif kind == 'in_tree':
            need = max(need, 14)
            params.append(('in_tree', some_provider(rng, world)))
        elif kind == 'resources':
            need = max(need, 4)
            params.append(('resources', resources_param(rng, world)))
        elif kind == 'required':
            need = max(need, 18)
            count = 1 if rng.random() < 0.8 else 2
            for _ in range(count):
                expr = traits_expr(rng, world, 39)
                if '!' in expr:
                    need = max(need, 22)
                if expr.startswith('in:'):
                    need = max(need, 39)
                params.append(('required', expr))
            if count > 1:
                need = max(need, 39) if rng.random() < 0.7 else need
    return q('/resource_providers' + qs(params), mv(rng, need))


# -- usages and allocations -----------------------------------------------

def usages_query(rng, world):
    r = rng.random()
    if r < 0.35:
        params = [('project_id', rng.choice(
            world.projects + [world.uuid(), INCOMPLETE]))]
        need = 9
        if rng.random() < 0.4:
            params.append(('user_id', rng.choice(world.users)))
        if rng.random() < 0.3:
            params.append(('consumer_type', rng.choice(
                ['INSTANCE', 'MIGRATION', 'all', 'unknown', 'OTHER'])))
            need = 38
        if rng.random() < 0.03:
            params = [('user_id', rng.choice(world.users))]
        return q('/usages' + qs(params), mv(rng, need))
    if r < 0.6:
        return q('/resource_providers/%s/usages' % some_provider(rng, world),
                 mv(rng, 0))
    if r < 0.8:
        return q('/resource_providers/%s/allocations'
                 % some_provider(rng, world), mv(rng, 0))
    consumers = list(world.consumers) + [world.uuid()]
    return q('/allocations/' + rng.choice(consumers), mv(rng, 0))


# -- allocation candidates ------------------------------------------------

def candidates_query(rng, world):
    minor = rng.randint(10, 39)
    if rng.random() < 0.04:
        minor = rng.randint(5, 9)
    params = []
    classes = world.classes()
    if minor < 25 or rng.random() < 0.4:
        # Only the unnumbered group.
        picks = aimed(rng, world, minor >= 29) if rng.random() < 0.75 else []
        if picks:
            merged = {}
            for _, rc, n in picks:
                merged[rc] = merged.get(rc, 0) + n
            params.append(('resources', ','.join(
                '%s:%d' % kv for kv in merged.items())))
        else:
            params.append(('resources', resources_param(rng, world)))
        if minor >= 17 and rng.random() < 0.4:
            if picks and minor >= 22:
                params.append(('required', aimed_traits(
                    rng, world, picks, any_ok=minor >= 39)))
            else:
                params.append(('required', traits_expr(
                    rng, world, minor, forbid_ok=minor >= 22,
                    any_ok=minor >= 39)))
        if minor >= 21 and rng.random() < 0.3:
            params.append(('member_of', member_of_expr(
                rng, world, forbid_ok=minor >= 32)))
        if minor >= 31 and rng.random() < 0.2:
            params.append(('in_tree', some_provider(rng, world)))
        if minor >= 35 and rng.random() < 0.25:
            params.append(('root_required', traits_expr(
                rng, world, minor, any_ok=False)))
        return q('/allocation_candidates' + qs(params), '1.%d' % minor)

    # Granular (1.25+): maybe an unnumbered group, then 1..3 suffixed ones.
    if rng.random() < 0.5:
        params.append(('resources', resources_param(rng, world, k=1)))
        if rng.random() < 0.3:
            params.append(('required', traits_expr(
                rng, world, minor, forbid_ok=True, any_ok=minor >= 39)))
    if minor >= 33 and rng.random() < 0.5:
        pool = ['_NET', '_COMPUTE', '_ACCEL', '1', '2', 'X']
    else:
        pool = ['1', '2', '3']
    suffixes = rng.sample(pool, rng.randint(1, 3))
    # Aim the groups at providers of one tree, one provider per group.
    targets = aimed(rng, world) if rng.random() < 0.75 else []
    for i, s in enumerate(suffixes):
        resourceless = minor >= 35 and rng.random() < 0.15
        pick_i = [targets[i]] if i < len(targets) else []
        if pick_i:
            p, rc, n = pick_i[0]
            res = '%s:%d' % (rc, n)
            others = [x for x in sorted(p.inv) if x != rc]
            if others and rng.random() < 0.3:
                res += ',%s:1' % rng.choice(others)
        else:
            res = resources_param(rng, world, k=rng.randint(1, 2),
                                  classes=classes)
        if not resourceless:
            params.append(('resources' + s, res))
        if resourceless or rng.random() < 0.35:
            if pick_i:
                params.append(('required' + s, aimed_traits(
                    rng, world, pick_i, any_ok=minor >= 39)))
            else:
                params.append(('required' + s, traits_expr(
                    rng, world, minor, any_ok=minor >= 39)))
        if rng.random() < 0.2:
            params.append(('member_of' + s, member_of_expr(
                rng, world, forbid_ok=minor >= 32)))
        if minor >= 31 and rng.random() < 0.1:
            params.append(('in_tree' + s, some_provider(rng, world)))
    if len(suffixes) > 1 or rng.random() < 0.5:
        if rng.random() < 0.92:
            params.append(('group_policy', rng.choice(['none', 'isolate'])))
    if minor >= 35 and rng.random() < 0.25:
        params.append(('root_required', traits_expr(
            rng, world, minor, any_ok=False)))
    if minor >= 36 and len(suffixes) > 1 and rng.random() < 0.4:
        params.append(('same_subtree', ','.join(
            rng.sample(suffixes, rng.randint(2, len(suffixes))))))
    if minor >= 31 and rng.random() < 0.1:
        params.append(('in_tree', some_provider(rng, world)))
    rng.shuffle(params)
    return q('/allocation_candidates' + qs(params), '1.%d' % minor)


# -- writes ---------------------------------------------------------------

def write_sequence(rng, world, allocations=True):
    """3..8 writes, most of them aimed at edges (capacity, in-use, parents,
    stale generations). The world model is updated loosely, only to keep
    aiming at things that exist."""
    out = []
    ops = ['inventory_shrink', 'inventory_delete', 'inventories_delete',
           'provider_delete', 'traits', 'traits_delete', 'aggregates',
           'stale_generation', 'class_delete', 'trait_delete',
           'provider_update', 'provider_create']
    if allocations:
        ops += ['claim', 'claim', 'overclaim', 'replace', 'delete_consumer',
                'post_allocations', 'stale_consumer', 'claim']
    for _ in range(rng.randint(3, 8)):
        op = rng.choice(ops)
        call = make_write(rng, world, op)
        if call is not None:
            call.kind = 'write'
            out.append(call)
    return out


def make_write(rng, world, op):
    provs = [p for p in world.providers]
    if not provs:
        return None
    p = rng.choice(provs)
    base = '/resource_providers/' + p.uuid
    if op == 'inventory_shrink':
        if not p.inv:
            return None
        invs = {}
        for rc, inv in p.inv.items():
            inv = dict(inv)
            if rng.random() < 0.6:
                inv['total'] = max(1, inv['total'] // rng.choice([2, 4, 8]))
                inv['max_unit'] = min(inv['max_unit'], inv['total'])
                inv['min_unit'] = min(inv['min_unit'], inv['max_unit'])
                inv['reserved'] = min(inv['reserved'], inv['total'])
            if rng.random() < 0.2:
                inv['reserved'] = inv['total']
            invs[rc] = inv
        if rng.random() < 0.3:
            invs.pop(rng.choice(sorted(invs)))
        p.inv = {rc: i for rc, i in invs.items() if valid_inventory(i)}
        if rng.random() < 0.5 and invs:
            rc = rng.choice(sorted(invs))
            return Call('PUT', base + '/inventories/' + rc,
                        dict(invs[rc], resource_provider_generation=GEN
                             + p.uuid), mv(rng, 0, below=0))
        return Call('PUT', base + '/inventories',
                    {'resource_provider_generation': GEN + p.uuid,
                     'inventories': invs}, mv(rng, 0, below=0))
    if op == 'inventory_delete':
        rcs = sorted(p.inv) or ['VCPU']
        rc = rng.choice(rcs)
        p.inv.pop(rc, None)
        return Call('DELETE', base + '/inventories/' + rc, None,
                    mv(rng, 0, below=0))
    if op == 'inventories_delete':
        return Call('DELETE', base + '/inventories', None, mv(rng, 5))
    if op == 'provider_delete':
        return Call('DELETE', base, None, mv(rng, 0, below=0))
    if op == 'traits':
        traits = sorted(set(pick(rng, world.traits(), rng.randint(0, 3))))
        return Call('PUT', base + '/traits',
                    {'resource_provider_generation': GEN + p.uuid,
                     'traits': traits}, mv(rng, 6))
    if op == 'traits_delete':
        return Call('DELETE', base + '/traits', None, mv(rng, 6))
    if op == 'aggregates':
        aggs = sorted(set(pick(rng, world.aggs, rng.randint(0, 2))))
        return Call('PUT', base + '/aggregates',
                    {'resource_provider_generation': GEN + p.uuid,
                     'aggregates': aggs}, mv(rng, 19, below=0))
    if op == 'stale_generation':
        gen = rng.choice([0, 1, 7, 99])
        return Call('PUT', base + '/traits',
                    {'resource_provider_generation': gen,
                     'traits': sorted(pick(rng, world.traits()))},
                    mv(rng, 6, below=0))
    if op == 'class_delete':
        name = rng.choice(world.custom_rcs + ['VCPU', 'CUSTOM_NOPE'])
        return Call('DELETE', '/resource_classes/' + name, None, mv(rng, 2))
    if op == 'trait_delete':
        name = rng.choice(world.custom_traits + ['CUSTOM_NOPE', 'HW_NUMA_ROOT'])
        return Call('DELETE', '/traits/' + name, None, mv(rng, 6))
    if op == 'provider_update':
        body = {'name': p.name + rng.choice(['', '-x'])}
        version = mv(rng, 0, below=0)
        others = [o.uuid for o in provs if o.uuid != p.uuid]
        if rng.random() < 0.6:
            version = mv(rng, 14, below=0)
            r = rng.random()
            if r < 0.4 and others:
                body['parent_provider_uuid'] = rng.choice(others)
            elif r < 0.6:
                body['parent_provider_uuid'] = None
            elif r < 0.8:
                body['parent_provider_uuid'] = p.parent
            else:
                body['parent_provider_uuid'] = p.uuid
        return Call('PUT', base, body, version)
    if op == 'provider_create':
        u = world.uuid()
        body = {'name': rng.choice(['new-' + u[:8], p.name]), 'uuid': u}
        if rng.random() < 0.6:
            body['parent_provider_uuid'] = rng.choice(
                [o.uuid for o in provs] + [world.uuid()])
        return Call('POST', '/resource_providers', body, mv(rng, 14))
    # allocations
    version = rng.choice(['1.28', '1.36', '1.38', '1.39'])
    if op in ('claim', 'overclaim'):
        allocs = world.random_allocation(fit=(op == 'claim'))
        if not allocs:
            return None
        c = world.uuid()
        world.consumers[c] = {'project': rng.choice(world.projects),
                              'user': rng.choice(world.users),
                              'type': 'INSTANCE', 'allocs': allocs}
        return Call('PUT', '/allocations/' + c,
                    world.allocation_body(c, allocs, version, None), version)
    if not world.consumers:
        return None
    c = rng.choice(sorted(world.consumers))
    if op == 'replace':
        allocs = world.random_allocation(fit=rng.random() < 0.7)
        if rng.random() < 0.15:
            allocs = {}
        world.consumers[c]['allocs'] = allocs
        return Call('PUT', '/allocations/' + c,
                    world.allocation_body(c, allocs, version, CGEN + c),
                    version)
    if op == 'stale_consumer':
        allocs = world.random_allocation(fit=True) or {}
        return Call('PUT', '/allocations/' + c,
                    world.allocation_body(c, allocs, version,
                                          rng.choice([None, 0, 5])), version)
    if op == 'delete_consumer':
        world.consumers.pop(c)
        return Call('DELETE', '/allocations/' + c, None, mv(rng, 0, below=0))
    if op == 'post_allocations':
        body = {}
        for c in pick(rng, sorted(world.consumers), rng.randint(1, 2)):
            cons = world.consumers[c]
            allocs = world.random_allocation(fit=rng.random() < 0.8)
            cons['allocs'] = allocs
            entry = {'allocations': {rp: {'resources': res}
                                     for rp, res in allocs.items()},
                     'project_id': cons['project'], 'user_id': cons['user'],
                     'consumer_generation': CGEN + c}
            if int(version.split('.')[1]) >= 38:
                entry['consumer_type'] = cons['type'] or 'INSTANCE'
            body[c] = entry
        return Call('POST', '/allocations', body, version)
    return None


def state_queries(world, allocations=True, usages=True):
    """Calls that read back the whole state of a world."""
    out = [q('/resource_providers', '1.14'),
           q('/resource_providers', '1.39'),
           q('/resource_classes', '1.7'),
           q('/traits?name=startswith:CUSTOM_', '1.6')]
    for p in world.providers:
        base = '/resource_providers/' + p.uuid
        out.append(q(base + '/inventories', '1.39'))
        out.append(q(base + '/traits', '1.39'))
        out.append(q(base + '/aggregates', '1.39'))
        if usages:
            out.append(q(base + '/usages', '1.39'))
        if allocations:
            out.append(q(base + '/allocations', '1.39'))
    if allocations:
        for c in sorted(world.consumers):
            out.append(q('/allocations/' + c, '1.39'))
    if usages:
        for proj in world.projects + [INCOMPLETE]:
            out.append(q('/usages?project_id=' + proj, '1.39'))
    return out


# -- allocation candidates in sharing worlds (--worlds sharing) -----------

# The request shapes issue 11 quoted, as (unsuffixed classes, [(suffix,
# classes)], group_policy): amounts are drawn from the world.
ISSUE_11_SHAPES = [
    (['IPV4_ADDRESS'], [('_NIC', ['MEMORY_MB'])], None),
    (['DISK_GB'], [('10', ['MEMORY_MB']), ('_ACCEL', ['VCPU'])], 'isolate'),
    (['DISK_GB'], [('6', ['NET_BW_IGR_KILOBIT_PER_SEC'])], 'isolate'),
    (['DISK_GB'], [('_PORT_1-b', ['SRIOV_NET_VF'])], None),
    (['CUSTOM_FPGA_X'], [('_COMPUTE', ['VCPU'])], None),
    # seed 51, world 29 of the small worlds
    (['IPV4_ADDRESS'], [('3', ['MEMORY_MB'])], 'isolate'),
]


def sharing_candidates_query(rng, world):
    """Mostly the unsuffixed group on the classes pools have, with suffixed
    groups on the classes trees have; a third of them the shapes above."""
    if rng.random() < 0.4:
        return candidates_query(rng, world)
    minor = rng.randint(33, 39)
    pool_rcs = sorted({rc for p in world.providers if p.sharing
                       for rc in p.inv}) or ['DISK_GB']
    tree_rcs = sorted({rc for p in world.providers if not p.sharing
                       for rc in p.inv}) or ['VCPU']
    if rng.random() < 0.35:
        plain, groups, policy = rng.choice(ISSUE_11_SHAPES)
    else:
        plain = pick(rng, pool_rcs, rng.choice([1, 1, 2]))
        if rng.random() < 0.2:
            plain = plain + pick(rng, tree_rcs, 1)
        groups = [(s, pick(rng, tree_rcs, rng.choice([1, 1, 2])))
                  for s in rng.sample(['1', '2', '_NIC', '_ACCEL', 'X'],
                                      rng.choice([1, 1, 2, 3]))]
        policy = rng.choice([None, 'none', 'isolate', 'isolate'])
    params = [('resources', ','.join(
        '%s:%d' % (rc, amount_for(rng, world, rc)) for rc in dict.fromkeys(
            plain)))]
    for suffix, rcs in groups:
        params.append(('resources' + suffix, ','.join(
            '%s:%d' % (rc, amount_for(rng, world, rc))
            for rc in dict.fromkeys(rcs))))
        if rng.random() < 0.1:
            params.append(('required' + suffix, traits_expr(
                rng, world, minor, any_ok=minor >= 39)))
    if policy is None and len(groups) > 1:
        policy = 'none'
    if policy:
        params.append(('group_policy', policy))
    if rng.random() < 0.1:
        params.append(('member_of', member_of_expr(rng, world)))
    if rng.random() < 0.05:
        params.append(('required', traits_expr(rng, world, minor,
                                               any_ok=minor >= 39)))
    if len(groups) > 1 and minor >= 36 and rng.random() < 0.1:
        params.append(('same_subtree', ','.join(s for s, _ in groups)))
    rng.shuffle(params)
    return q('/allocation_candidates' + qs(params), '1.%d' % minor)


def with_limit(rng, call, n):
    """(N, `call` with `limit=N` added) for a candidates query whose full
    answer has `n` candidates: N mostly cuts it (below n), now and then not;
    (None, None) below 1.16, which has no `limit`."""
    if int(call.version.split('.')[1]) < 16:
        return None, None
    limit = rng.randint(1, n - 1) if n > 1 and rng.random() < 0.8 else (
        rng.randint(n, n + 2))
    sep = '&' if '?' in call.path else '?'
    return limit, q('%s%slimit=%d' % (call.path, sep, limit), call.version)

"""Starting, talking to and stopping the two servers under comparison.

A `Server` is one HTTP endpoint with a fresh database: the real OpenStack
Placement (gunicorn + SQLite + noauth2, from the venv that scripts/differential
makes) or allot (target/release/allot on SQLite). Both are started in their own
process group on a free loopback port and stopped by that group's id.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def add_server_args(parser, repo):
    """The two options every script here takes: the Placement venv and the
    allot binary, defaulting to what scripts/differential passes."""
    parser.add_argument('--placement-venv', default=os.environ.get(
        'ALLOT_DIFFERENTIAL_VENV',
        os.path.expanduser('~/.cache/allot-differential/venv')))
    parser.add_argument('--allot-bin', default=os.environ.get(
        'ALLOT_BIN', os.path.join(repo, 'target', 'release', 'allot')))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class Response:
    __slots__ = ('status', 'body', 'text')

    def __init__(self, status, body, text):
        self.status = status
        self.body = body
        self.text = text


class ServerDied(Exception):
    pass


class Server:
    """One server process. `kind` is 'placement' or 'allot'."""

    def __init__(self, kind, label, workroot, placement_venv=None,
                 allot_bin=None, request_timeout=60, placement_patch=None):
        self.kind = kind
        self.label = label
        self.workroot = workroot
        self.placement_venv = placement_venv
        self.allot_bin = allot_bin
        self.request_timeout = request_timeout
        # None: the stock Placement. A string: Placement served from
        # placement_patched.py, with these known bugs mended unless a
        # request's X-Allot-Placement-Patches header names others.
        self.placement_patch = placement_patch
        self.proc = None
        self.port = None
        self.workdir = None
        self.log = None
        self.starts = 0
        self.requests = 0

    # -- lifecycle ---------------------------------------------------------

    def start(self, startup_timeout=90):
        self.starts += 1
        self.workdir = tempfile.mkdtemp(
            prefix='%s-%d-' % (self.label, self.starts), dir=self.workroot)
        self.port = free_port()
        self.log = os.path.join(self.workdir, 'server.log')
        if self.kind == 'placement':
            argv = self._placement_argv()
            env = dict(os.environ, OS_PLACEMENT_CONFIG_DIR=self.workdir)
            if self.placement_patch is not None:
                here = os.path.dirname(os.path.abspath(__file__))
                env['PYTHONPATH'] = here
                env['PYTHONDONTWRITEBYTECODE'] = '1'
                env['ALLOT_PLACEMENT_PATCHES'] = self.placement_patch
        else:
            argv = [self.allot_bin, 'serve',
                    '--bind', '127.0.0.1:%d' % self.port,
                    '--database', 'sqlite:%s/allot.db' % self.workdir,
                    '--log', 'warn',
                    # The same rules as the Placement beside it
                    # (enforce_new_defaults = False), not allot's default.
                    '--policy', 'legacy']
            env = dict(os.environ)
        with open(self.log, 'wb') as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                stdin=subprocess.DEVNULL, start_new_session=True,
                cwd=self.workdir)
        deadline = time.monotonic() + startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise ServerDied('%s exited with %s while starting; log:\n%s'
                                 % (self.label, self.proc.returncode,
                                    self.tail_log()))
            try:
                conn = http.client.HTTPConnection('127.0.0.1', self.port,
                                                  timeout=5)
                conn.request('GET', '/')
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerDied('%s did not answer within %ss; log:\n%s'
                                     % (self.label, startup_timeout,
                                        self.tail_log()))
                time.sleep(0.1)

    def _placement_argv(self):
        venv = self.placement_venv
        conf = os.path.join(self.workdir, 'placement.conf')
        with open(conf, 'w') as fh:
            fh.write('[DEFAULT]\ndebug = False\n'
                     '[api]\nauth_strategy = noauth2\n'
                     '[placement_database]\n'
                     'connection = sqlite:///%s/placement.db\n'
                     '[oslo_policy]\nenforce_new_defaults = False\n'
                     % self.workdir)
        # db sync, then exec gunicorn (one sync worker): the same as
        # conformance/runner/placement-real-server.
        script = ('"$1/bin/placement-manage" --config-file "$2" db sync '
                  '&& exec "$1/bin/gunicorn" -w 1 -b 127.0.0.1:"$3" '
                  '--timeout 300 placement.wsgi.api:application')
        if self.placement_patch is not None:
            script = script.replace('placement.wsgi.api:application',
                                    'placement_patched:application')
        return ['/bin/sh', '-c', script, 'placement-server', venv, conf,
                str(self.port)]

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.proc = None

    def restart(self, keep=False):
        """A new process with a new, empty database."""
        self.stop()
        if not keep and self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.start()

    def tail_log(self, n=40):
        try:
            with open(self.log, 'rb') as fh:
                lines = fh.read().decode('utf-8', 'replace').splitlines()
            return '\n'.join(lines[-n:])
        except OSError:
            return '(no log)'

    # -- HTTP --------------------------------------------------------------

    def request(self, method, path, body=None, version='1.39', extra=None):
        """One request as admin at `version` (with the `extra` headers);
        the answer as a Response."""
        headers = {'x-auth-token': 'admin',
                   'accept': 'application/json',
                   'openstack-api-version': 'placement %s' % version}
        headers.update(extra or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers['content-type'] = 'application/json'
        self.requests += 1
        for attempt in range(3):
            conn = http.client.HTTPConnection('127.0.0.1', self.port,
                                              timeout=self.request_timeout)
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                break
            except (ConnectionError, http.client.RemoteDisconnected):
                if self.proc is not None and self.proc.poll() is not None:
                    raise ServerDied('%s died; log:\n%s'
                                     % (self.label, self.tail_log()))
                if attempt == 2:
                    raise
                time.sleep(0.2)
            finally:
                conn.close()
        text = raw.decode('utf-8', 'replace')
        parsed = None
        if raw:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
        return Response(status, parsed, text)

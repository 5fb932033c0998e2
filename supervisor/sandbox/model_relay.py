"""Networkless workers: a worker reaches its model API through a Unix socket, not a network.

Why: a container on a Docker network costs the engine three re-execs of itself as it starts
(the network-key hook: ~0.28 CPU-s and ~0.17 s before the CLI's process starts, measured on the
2-core host), and the host a firewall rule per run. A worker needs one thing from outside: its
run's route in the proxy daemon (proxyd.py). So the daemon listens for the run on a Unix socket
in a folder of the run's own; that folder is bound into the run's container alone, and the
container has Docker's networking disabled (loopback only: nothing else to reach, no other
worker, no host service). Inside, a relay listens on loopback at RELAY_PORT and pipes each
connection to the socket; the CLI's base URL names the usual alias, which the container's hosts
file points at loopback.

The relay is Perl (Debian's perl-base is essential: every sandbox image has it), started in
0.03 s and 0.02 CPU-s; node took 0.15 of each. It is the worker's own process: the worker may
stop or replace it and gains nothing by it, since the socket is its run's route, which takes only
its placeholder and model paths, as on the network. It is one process serving every connection
(a select loop): it forked one per connection once, and a worker whose own processes had used up
the container's pids limit (a fork flood, a build's many jobs) lost its model connection.

gVisor workers (`worker_runtime: runsc-net`) keep the network: its user-space kernel does not
connect to the host's sockets unless told to (`--host-uds`).
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
from pathlib import Path

from supervisor.core.errors import SandboxError

RELAY_PORT = 38479
CONTAINER_DIR = "/run/supervisor-model"
SOCKET_NAME = "api"
RELAY_FILE = "model_relay.pl"
"""In the run folder (/run/supervisor), written by the sandbox for a run with a socket route."""
READY = "/tmp/.supervisor-model-relay"

RELAY = r"""use strict; use warnings;
use IO::Socket::INET; use IO::Socket::UNIX; use IO::Select; use Errno qw(EAGAIN EINTR);
my ($path, $port, $ready) = @ARGV;
my $server = IO::Socket::INET->new(
    LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 64, ReuseAddr => 1) or exit 1;
if (open(my $mark, '>', $ready)) { close($mark) }
$SIG{PIPE} = 'IGNORE';
my (%peer, %out, %done);  # by socket: its other end, bytes owed to it, its other end has ended
my $reading = IO::Select->new($server);
my $writing = IO::Select->new();
sub drop {
    for my $s (@_) {
        $reading->remove($s); $writing->remove($s);
        delete $peer{$s}; delete $out{$s}; delete $done{$s}; close $s;
    }
}
sub settle {  # a side whose sender ended and whose bytes are out is shut; both shut: closed
    my ($s) = @_;
    return if length $out{$s};
    shutdown($s, 1) if $done{$s};
    my $p = $peer{$s};
    drop($s, $p) if $done{$s} && $done{$p} && !length $out{$p};
}
while (1) {
    my ($can_read, $can_write) = IO::Select->select($reading, $writing, undef);
    next unless $can_read;
    for my $s (@$can_write) {
        next unless exists $peer{$s};
        my $wrote = syswrite($s, $out{$s});
        if (!defined $wrote) { drop($s, $peer{$s}) unless $! == EAGAIN || $! == EINTR; next }
        substr($out{$s}, 0, $wrote) = '';
        next if length $out{$s};
        $writing->remove($s);
        my $p = $peer{$s};
        $reading->add($p) unless $done{$s};  # read again from the sender it had to wait for
        settle($s);
    }
    for my $s (@$can_read) {
        if ($s == $server) {
            my $client = $server->accept or next;
            my $up = IO::Socket::UNIX->new(Peer => $path, Type => SOCK_STREAM);
            if (!$up) { close $client; next }
            $_->blocking(0) for $client, $up;
            @peer{$client, $up} = ($up, $client);
            @out{$client, $up} = ('', '');
            $reading->add($client, $up);
            next;
        }
        next unless exists $peer{$s};
        my $p = $peer{$s};
        my $got = sysread($s, my $buffer, 65536);
        next if !defined $got && ($! == EAGAIN || $! == EINTR);
        if (!$got) { $reading->remove($s); $done{$p} = 1; settle($p); next }
        $out{$p} .= $buffer;
        $writing->add($p);
        $reading->remove($s) if length $out{$p} > 1048576;  # until its reader catches up
    }
}
"""

NOT_STARTED = (
    "supervisor: the model relay did not start in this container, so the CLI cannot reach its "
    "model API. Fix: the sandbox image needs perl (the perl-base package); build custom images "
    "FROM the supervisor sandbox image"
)
"""No single quote in it: the entrypoint prints it single-quoted."""
START = (
    f"if [ -f /run/supervisor/{RELAY_FILE} ]; then "
    f"perl /run/supervisor/{RELAY_FILE} {CONTAINER_DIR}/{SOCKET_NAME} {RELAY_PORT} {READY} "
    "</dev/null >/dev/null 2>&1 & fi; "
)
"""The entrypoint's first part: the relay, started beside the home's set-up."""
WAIT = (
    f"if [ -f /run/supervisor/{RELAY_FILE} ]; then i=0; "
    f'while [ ! -e {READY} ] && [ "$i" -lt 400 ]; do sleep 0.005; i=$((i+1)); done; '
    f"[ -e {READY} ] || echo '{NOT_STARTED}' >&2; fi; "
)
"""Before the CLI starts: the relay listening (waited for at most 2 s; one that did not start
is named on stderr, where the step's failure shows it, and the CLI finds its API unreachable)."""


def uses_socket(worker_runtime: str) -> bool:
    """Whether workers under this runtime get a socket route (gVisor's need the network)."""
    return "runsc" not in worker_runtime


def route_folder(daemon_socket: Path, placeholder: str) -> Path:
    """The folder of a run's socket: named for its placeholder (a daemon started anew opens
    the route of an adopted run at the path its container has bound), by digest, so that the
    placeholder is not in `docker inspect`."""
    digest = hashlib.sha256(placeholder.encode()).hexdigest()[:16]
    folder = daemon_socket.parent / "routes" / digest
    if len(str(folder / SOCKET_NAME)) > 100:  # sun_path: 108 bytes; the daemon's own is shorter
        folder = daemon_socket.parent / digest
    folder.parent.mkdir(mode=0o700, exist_ok=True)  # the daemon's folder, or one inside it
    folder.mkdir(exist_ok=True)
    folder.chmod(0o755)  # seen only through the container's bind: its user is not ours as root
    return folder


def unix_listener(path: Path) -> socket.socket:
    """A run's socket, listening; one a killed daemon left at its path is replaced."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    try:
        server.bind(str(path))
        path.chmod(0o666)  # the container's user is not ours when we are root
    except OSError as e:
        server.close()
        raise SandboxError(
            f"Cannot listen on {path}: {e.strerror}.",
            "Check that the proxy's folder is writable and not full.",
        ) from e
    server.listen(128)
    return server


def remove(folder: Path) -> None:
    """A closed route's socket and folder."""
    with contextlib.suppress(OSError):
        (folder / SOCKET_NAME).unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()

"""Runs one peer program and kills it when the test process goes away.

Usage: watchdog.py [--cleanup DIR] [--user NAME] [--stop-signal SIG] -- PROGRAM [ARGS...]

The test harness starts this script as the leader of a new process group, with a pipe
as standard input; the peer inherits the group. When the pipe's writing end closes (the
test binary exited, crashed or was killed) the read below returns EOF: the peer is
killed, DIR (its temporary directory) removed, and the whole group killed, so no peer
outlives the tests. When the peer exits on its own, this script exits with its status.

--user runs the peer as another user (PostgreSQL refuses to run as root). --stop-signal
(e.g. QUIT) is sent to the peer first, giving it 10 s to shut down cleanly before it is
killed: a PostgreSQL killed with SIGKILL leaves its System V shared memory segment behind.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading


def _group_of(user):
    """The primary group of `user` (None when no user is given)."""
    if user is None:
        return None
    import pwd

    return pwd.getpwnam(user).pw_gid


def main() -> int:
    args = sys.argv[1:]
    cleanup = None
    user = None
    stop_signal = None
    while args[:1] in (["--cleanup"], ["--user"], ["--stop-signal"]):
        if args[0] == "--cleanup":
            cleanup = args[1]
        elif args[0] == "--user":
            user = args[1]
        else:
            stop_signal = getattr(signal, "SIG" + args[1])
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print("usage: watchdog.py [--cleanup DIR] -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    child = subprocess.Popen(args, stdin=subprocess.DEVNULL, user=user, group=_group_of(user))
    stopping = threading.Event()

    def guard() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except Exception:
            pass
        # The test process is gone: take the peer (and anything it started) down.
        stopping.set()
        if stop_signal is not None:
            try:
                child.send_signal(stop_signal)
                child.wait(timeout=10)
            except Exception:
                pass
        try:
            child.kill()
            child.wait(timeout=10)
        except Exception:
            pass
        if cleanup:
            shutil.rmtree(cleanup, ignore_errors=True)
        try:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        finally:
            os._exit(1)

    threading.Thread(target=guard, daemon=True).start()
    code = child.wait()
    if stopping.is_set():
        # The guard is cleaning up and ends the process itself.
        threading.Event().wait(30)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Not sys.exit: interpreter shutdown would wait on the guard thread's blocked read of
    # stdin and abort ("could not acquire lock ... at interpreter shutdown").
    os._exit(status)

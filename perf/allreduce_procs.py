#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""allreduce_procs.py - what both launchers of `tally-perf allreduce` (the namespace cluster
and real hosts) do alike: background commands with a log each (or their command lines with
--dry-run), reading a log, stopping a process group, waiting for a set under one deadline.
A launcher sets self.o, self.tmp, self.procs, self.dry and defines line(where, cmd, env)."""
import os
import shlex
import signal
import subprocess
import time


class Procs:
    def bg(self, where, logname, cmd, env=None):
        argv = self.line(where, cmd, env)
        if self.o.dry_run:
            self.dry.append(" ".join(shlex.quote(x) for x in argv))
            return None
        f = open(os.path.join(self.tmp, logname + ".log"), "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        p.logname = logname
        self.procs.append(p)
        return p

    def logtext(self, logname):
        try:
            with open(os.path.join(self.tmp, logname + ".log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, p, wait=15):
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            p.wait(wait)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def wait_all(self, procs, timeout):
        deadline = time.time() + timeout
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    self.stop(q, 2)
                return False
        return True

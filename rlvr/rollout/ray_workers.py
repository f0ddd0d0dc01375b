"""Rollout workers as Ray actors (`cluster.ray_address` with `rollout.max_staleness > 0`; the optional 'ray' extra).

Each actor runs the same worker loop as a local rollout worker process (`rlvr.rollout.workers.serve`) over a
connection back to the trainer: the actor listens on its node (an authenticated multiprocessing listener, key
chosen per actor by the trainer), the trainer connects, and jobs, weight announcements and results travel as they
do to a subprocess. Weights are broadcast over the same gloo group, whose store listens on the trainer's node
address. A dead actor (node lost, process killed) shows as its serving call finishing; the collector replaces it
like a dead subprocess, and its unfinished jobs are generated again there, accepted once per job id.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Client, Connection, Listener

from rlvr.rewards.ray_pool import _ray, init_ray
from rlvr.rollout.workers import WEIGHT_SYNC_TIMEOUT_S, serve


class RolloutActor:
    """The body of a Ray rollout actor: listen, then serve one trainer connection until told to stop."""

    def listen(self, authkey: bytes) -> tuple[tuple[str, int], int]:
        """Open the listener; (its address, this process's pid)."""
        import ray

        self.listener = Listener((ray.util.get_node_ip_address(), 0), authkey=authkey)
        return self.listener.address, os.getpid()

    def serve(self) -> None:
        conn = self.listener.accept()
        self.listener.close()
        serve(conn)


class RayActorProcess:
    """The collector's handle on one rollout actor (as `LocalProcess` is on a subprocess): pid, poll(), stop()."""

    def __init__(self, actor, serving, pid: int):
        self.actor, self.serving, self.pid = actor, serving, pid

    def poll(self) -> int | None:
        """None while the actor serves; 1 once its serving call has ended (stopped, crashed or killed)."""
        ready, _ = _ray().wait([self.serving], timeout=0)
        return 1 if ready else None

    def stop(self) -> None:
        """Give the actor a moment to return from serving, then kill it."""
        ray = _ray()
        ray.wait([self.serving], timeout=5)
        ray.kill(self.actor, no_restart=True)


class RayLauncher:
    """Starts rollout actors on the cluster at `address` ('local' starts a Ray instance here, closed with the
    collector)."""

    def __init__(self, address: str, num_cpus: int | None = None):
        self.started = init_ray(address, num_cpus)
        ray = _ray()
        self.actor_class = ray.remote(num_cpus=1, max_restarts=0)(RolloutActor)
        self.host = ray.util.get_node_ip_address()  # where the actors reach the trainer's weight store

    def launch(self) -> tuple[Connection, RayActorProcess]:
        """A fresh actor, serving a connection to this process."""
        ray = _ray()
        authkey = os.urandom(32)
        actor = self.actor_class.remote()
        address, pid = ray.get(actor.listen.remote(authkey), timeout=WEIGHT_SYNC_TIMEOUT_S)
        serving = actor.serve.remote()
        return Client(address, authkey=authkey), RayActorProcess(actor, serving, pid)

    def close(self) -> None:
        if self.started:
            _ray().shutdown()
            self.started = False

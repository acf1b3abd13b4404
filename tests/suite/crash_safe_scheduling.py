"""pytest-xdist's ``--dist loadgroup`` scheduler, mended where a crashed worker makes it hang.

``make unit`` runs the suite on two workers in loadgroup mode. When a worker dies (a native
client aborting its process, pytest-timeout's thread method ending a stuck test, a full disk),
xdist 3.8.0 puts the dead worker's work back on the queue and starts a replacement. Three faults
in ``LoadScopeScheduling`` then end the run with an INTERNALERROR or hang it for ever (reported
upstream as pytest-xdist issues 1189, 1323, 1327, 1362 and 1378, open at 3.8.0):

* The dead worker's whole workload is queued again, its finished units with it. A finished unit
  sent to a worker is an empty list of items: nothing runs, no report comes back, and the worker
  is never given more.
* A worker runs an item only once it holds the next one, or has been told to shut down. A
  replacement is given one unit when it has collected; a unit of one item then waits for ever.
* The scheduler counts collection as complete while a replacement is still collecting (the dead
  worker's collection is still counted), and gives the replacement work by indexing a collection
  it does not have yet: KeyError.

:class:`CrashSafeLoadGroupScheduling` queues only the items that did not finish, tops a worker up
until it holds two items or the queue is empty (then tells it to shut down after them, as the
first distribution does), and gives a worker work only once its collection has arrived. The dead
worker's collection stays counted: a worker that finishes is removed as a dead one is, and
counting collections again would wait for ever on one that finished while a replacement was still
collecting.

``tests/conftest.py`` installs it for ``--dist loadgroup``;
``tests/suite/test_crash_safe_scheduling.py`` runs worker crashes through it.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling
from xdist.workermanage import WorkerController

WORKER_HELD_ITEMS_MIN_COUNT = 2
"""A worker runs an item only once it holds the next (or a shutdown): two keep it running."""


class CrashSafeLoadGroupScheduling(LoadGroupScheduling):
    """Loadgroup scheduling that a worker's crash cannot hang (see the module's docstring)."""

    def remove_node(self, node: WorkerController) -> str | None:
        """Forget ``node``; queue again what it had not finished. Returns the item it was running
        when it died (None when it had nothing left), which xdist reports as crashed."""
        workload = self.assigned_work.pop(node)
        unfinished = {
            scope: {nodeid: False for nodeid, done in unit.items() if not done}
            for scope, unit in workload.items()
        }
        unfinished = {scope: unit for scope, unit in unfinished.items() if unit}
        if not unfinished:
            return None
        crashed_item = next(iter(next(iter(unfinished.values()))))
        self.workqueue.update(unfinished)
        for other in self.nodes:
            self._reschedule(other)
        return crashed_item

    def _reschedule(self, node: WorkerController) -> None:
        if node.shutting_down or node not in self.registered_collections:
            return  # a worker still collecting is scheduled when its collection arrives
        if not self.workqueue:
            node.shutdown()
            return
        if self._held_count(node) > WORKER_HELD_ITEMS_MIN_COUNT:
            return  # as xdist: one more unit once a worker is down to two items
        self._assign_work_unit(node)
        while self.workqueue and self._held_count(node) < WORKER_HELD_ITEMS_MIN_COUNT:
            self._assign_work_unit(node)
        if self._held_count(node) < WORKER_HELD_ITEMS_MIN_COUNT:
            node.shutdown()  # the queue is out: its last item runs on the shutdown

    def _held_count(self, node: WorkerController) -> int:
        return self._pending_of(self.assigned_work[node])

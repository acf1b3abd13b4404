"""The benchmark harness beneath ``bolide bench`` (:mod:`bolide.cli.bench`, the command):

* :mod:`.runtime`: settings, stamped bodies and latency recording, CPU accounting, the
  result format and the child processes of a run;
* :mod:`.workloads`: the client-mode senders and receivers (Producer, PushConsumer) and the
  produce / consume / e2e loops;
* :mod:`.raw`: the raw-mode senders and receivers, built on the request layer
  (:mod:`bolide.client.rpc`) without the client's per-message work.

The scripts of the repository's top-level ``bench/`` package import from here too. It imports
no module of :mod:`bolide.cli` (an import contract).
"""

"""The blocking API, one package: each facade runs its async core on a private event-loop
thread (:mod:`~bolide.client.blocking.loop`) — the producer (:mod:`.producer`), the
transactional producer (:mod:`.transaction`), the push and pull consumers (:mod:`.consumers`)
and the admin client (:mod:`.admin`). ``bolide.Producer`` and the other top-level names are
these classes; every behaviour lives once, in the async core."""

"""Durable storage of the service: the privacy ledger and the window state store.

The agents depend only on the ports (:mod:`privstream.agents.ledger_port`,
:class:`privstream.agents.interfaces.StateStore`); this package holds their implementations:

* :mod:`~privstream.stream_app.store.sqlite_ledger`: the ledger in one SQLite file (one host);
* :mod:`~privstream.stream_app.store.sqlite_state`: window buffers and SOA snapshots in SQLite.
"""

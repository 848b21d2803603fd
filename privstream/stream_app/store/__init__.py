"""Durable storage of the service: the privacy ledger and the window state store.

The agents depend only on the ports (:mod:`privstream.agents.ledger_port`,
:class:`privstream.agents.interfaces.StateStore`); this package holds their implementations,
on two backends with the same semantics (one contract suite runs over both), selected by the
settings' ``store_url`` (:mod:`.factory`):

* :mod:`.sqlite_ledger`, :mod:`.sqlite_state`: SQLite files, shared by the processes of one host;
* :mod:`.postgres_ledger`, :mod:`.postgres_state`: one PostgreSQL database shared across hosts,
  over :mod:`.postgres_db` (connection pool, transactions rerun after a cut connection);
* shared by both: :mod:`.ledger_rules` (validation, exact rational budgets, the budget check)
  and :mod:`.migrations` (versioned schemas as ordered migrations);
* :mod:`.pg_server`: a throwaway PostgreSQL server for the tests and ``privstream bench ledger``.
"""

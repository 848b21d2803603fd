"""Durable storage of the service: the privacy ledger and the window state store.

The agents depend only on the ports (:mod:`privstream.agents.ledger_port`,
:class:`privstream.agents.interfaces.StateStore`); this package holds their implementations,
selected by the settings' ``store_url`` (:mod:`.factory`). Each store's rules are written once
and run on two backends (one contract suite runs over both):

* the rules: :mod:`.ledger` (reserve, charge, complete, the filter, fencing hooks, the outbox),
  with :mod:`.ledger_rules` (validation, exact rational budgets, the budget check, the
  individual filter's arithmetic) and :mod:`.ledger_governance` (identity and epoch, accepted
  privacy configurations, the audit log); :mod:`.state` (appends, windows, the release tree's
  nodes); :mod:`.schema` (every store's migrations); all in portable SQL over a :mod:`.dialect`;
* a worker's start: :mod:`.identity` (the ledger must be the one the deployment has seen, with
  the configurations it accepted: :mod:`.privacy_config`, :mod:`.published`);
* SQLite, shared by the processes of one host: :mod:`.sqlite_ledger`, :mod:`.sqlite_state`,
  over :mod:`.sqlite_db` (one connection, serialised transactions, busy retries);
* PostgreSQL, one database shared across hosts: :mod:`.postgres_ledger`, :mod:`.postgres_state`,
  over :mod:`.postgres_db` (connection pool, transactions rerun after a cut connection);
* :mod:`.migrations` (versioned schemas as ordered migrations), :mod:`.leases` (partition
  leases), :mod:`.probe` (readiness), :mod:`.pg_server` (a throwaway PostgreSQL server for the
  tests and ``privstream bench ledger``).
"""

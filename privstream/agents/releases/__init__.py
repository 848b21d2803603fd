"""The release path: windows of examples -> a private learner -> the ledger -> the public topic.

**The public schedule.** Which releases exist, their ids, their ledger entries, their certificates
and when they appear are a function of the configuration and the clock only, never of which
windows hold data or how long a learner ran on them:

* count windows (example level) close at the record timestamp of their N-th example (n is public);
* time windows close on the worker's clock (an injected ``clock``; production: the wall clock):
  window ``w`` closes when ``clock() >= (w+1)*seconds + allowed_lateness_seconds``. Every window
  from the stream's first one (the one holding its schedule start) on is closed, charged and
  released, empty ones included (the learner's release on zero examples, same certificate shape);
  after downtime the missed windows are caught up in order. A timer (:meth:`ReleaseAgent.tick`)
  closes them: no example is needed. An example whose window is closed already is late (an
  operator metric) and feeds the SOA only; one dated further from the clock than the public
  maximum skew never gets here (validation dead-letters it, ``event_time_out_of_range``);
* every release has a **deadline** (:mod:`privstream.agents.timing`): the end of its publication
  slot, ``publish_delay_seconds`` after its node closed or after the stream's previous slot. At
  the deadline the release is published with the deadline as its record's timestamp: the
  learner's output if its fit finished, otherwise a **default release**: the learner's fit on a
  public stand-in input (:func:`stand_in`) with the same parameters and randomness, the same
  certificate, charged the same. The default is computed before the fit, so it is ready at the
  deadline whether the fit is unfinished (its process is stopped then), raised, or its process
  died. A release published after its deadline (the worker overloaded) is counted and logged for
  operators, never shown to the public;
* each learner reads at most ``max_node_examples`` examples (the input cap, stated in the
  certificate), so its run time has a public bound and the deadline can sit above it.

**The release tree.** With ``levels = L``, the window that completes an aligned node of level j
(2^j windows, ids ``{family}-L{j}-{m}``) also schedules that node's release, at the level's ε;
each example is in one node per level, so the ledger's lifetime cost per example is the sum over
the levels (parallel composition within a level).

A node's examples live in the state store in compact form: a window that closes becomes node
(0, w) (its raw rows dropped in the same transaction), a node (j, m) is merged from its two
children when its release runs, and a node's data is dropped once its parent is built and the
node released. The learner gets the node's data expanded exactly (a histogram's (x, y) rows
repeated by their counts, then put in a uniformly random order drawn from the release's seed: a
release is a function of the node's multiset of examples and the seed, and any learner DP on
sequences stays DP, see :func:`privstream.agents.fits.prepared_input`).

For each node (a window is a node of level 0), a background task, in the schedule's order

1. returns early if the ledger already holds this node's release (a replay: it re-publishes the
   stored bytes if they were not confirmed published; nothing is recomputed with fresh noise);
2. reserves the release in the ledger (the charge, write-ahead, with a secret seed and the
   deadline), before the data is loaded or the learner runs, so budgets do not depend on either;
   a refusal (a lowered budget: a valid configuration never runs out) is recorded by the ledger.
   At the user level it names no users: the individual filter charged them at ingest
   (:mod:`.admission`: each user present pays for every node covering the window at their first
   row, unless their lifetime budget would be passed), and the excluded ones' rows were never
   stored;
3. runs the default and then the learner in the stream's own learner process (one stream's fit
   never holds up another's), with randomness derived from the seed, so a recomputation after a
   crash is bit-identical;
4. at the deadline completes the reservation with the bytes ready then, publishes exactly those
   bytes and marks them published. A reservation whose deadline passed while no worker ran it
   (a crash) is completed with its default: its fate is a function of time only.

A worker that lost the stream's partition to another worker (the ledger or the publisher raises
:class:`~privstream.agents.interfaces.LeaseLostError`: the service fences both by partition
leases) leaves the window, unclosed, to the new owner.

Nothing computed from raw examples without a charged mechanism leaves this package.

The rooms, each with its rule in its docstring:

* :mod:`.policy`: what a stream releases and costs, the cap and group-privacy rules;
* :mod:`.workload`: a product's learner call, the default's stand-in input, a slot's worst case;
* :mod:`.nodes`: a node's data in the state store and its public description;
* :mod:`.certificate`: a release's bytes and the certificate that states its guarantee;
* :mod:`.state`: what the agent keeps per stream and per node in flight;
* :mod:`.schedule`: when windows close, and what a crash left unreleased;
* :mod:`.reservation`: a release's charge, written ahead;
* :mod:`.admission`: the individual filter at ingest (the user level);
* :mod:`.preparation`: reserve, default and fit of a node's releases before their deadline;
* :mod:`.publishing`: the release at its deadline, and the outbox after a crash;
* :mod:`.guard`: ingest holds off while a node is prepared and around the deadlines;
* :mod:`.agent`: the agent that ties them to the schedule.
"""

from __future__ import annotations

from privstream.agents.releases.agent import ReleaseAgent
from privstream.agents.releases.certificate import DEADLINE_RULE
from privstream.agents.releases.policy import (
    Product,
    ReleasePolicy,
    cap_halves_epsilon,
    cap_parameters,
    capped,
    largest_input,
    learner_privacy,
    node_expected_size,
    node_sample_size,
    topic_of_key,
)
from privstream.agents.releases.publishing import DEADLINE_TOLERANCE_SECONDS, Publisher
from privstream.agents.releases.workload import learner_call, slot_workload, stand_in

__all__ = [
    "DEADLINE_RULE",
    "DEADLINE_TOLERANCE_SECONDS",
    "Product",
    "Publisher",
    "ReleaseAgent",
    "ReleasePolicy",
    "cap_halves_epsilon",
    "cap_parameters",
    "capped",
    "largest_input",
    "learner_call",
    "learner_privacy",
    "node_expected_size",
    "node_sample_size",
    "slot_workload",
    "stand_in",
    "topic_of_key",
]

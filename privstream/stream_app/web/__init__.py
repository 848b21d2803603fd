"""The worker's HTTP edge: a public listener and an operator listener (DESIGN.md §4).

* :mod:`.listener`: one aiohttp server as a service of the faust app; the bearer-token guard;
* :mod:`.public`: pages any subscriber may see (configuration, budgets, published releases);
* :mod:`.page`: the page for people on the public listener (HTML, charts, the releases over time);
* :mod:`.operator`: raw figures and probes for operators (trusted zone).
"""

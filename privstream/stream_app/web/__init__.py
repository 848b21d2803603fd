"""The worker's HTTP edge: a public listener and an operator listener, one per trust zone.

* :mod:`.listener`: one aiohttp server as a service, its limits, the bearer-token guard;
* :mod:`.public`: pages any subscriber may see (configuration, budgets, published releases, keys);
* :mod:`.page`: the page for people on the public listener (HTML, charts, the releases over time);
* :mod:`.public_process`: the public listener in a child process of the worker;
* :mod:`.operator`: raw figures and probes for operators (trusted zone).
"""

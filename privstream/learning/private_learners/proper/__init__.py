"""The proper private learner ``"proper"`` of Ghazi–Golowich–Kumar–Manurangsi (GGKM21).

* :mod:`.learner`: :class:`~.learner.ProperLearner` (PolyPriLearn then PolyPriPropLearn);
* :mod:`.irreducibility`: Ldim and the irreducibility order of subclasses (GGKM Def 4.1);
* :mod:`.reduce_tree`: ReduceTree (Alg 1), the deterministic per-block step;
* :mod:`.sparse_selection`: the (ε, δ)-DP sparse selection of one element lying in many sets;
* :mod:`.minimax_cover`: a small proper cover of the selected classifier (Lemmas 6.1-6.2);
* :mod:`.audit_spec`: its privacy-audit spec (worst-case pair, broken variants).
"""

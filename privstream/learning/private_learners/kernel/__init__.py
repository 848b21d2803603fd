"""The vector learner ``"kernel"``: a Gaussian-kernel rule from noisy class mean embeddings, (ε, δ)-DP.

* :mod:`.learner`: :class:`~.learner.KernelLearner`;
* :mod:`.rule`: the released :class:`~.rule.KernelModel` (kind ``"random-features"``);
* :mod:`.features`: the random Fourier features of the Gaussian kernel (public seed, unit norm);
* :mod:`.steps`: the three private steps (statistics, the class-weighted sum, the offset);
* :mod:`.budget`: (ε, δ) as one zCDP budget, split between the steps;
* :mod:`.audit_specs`: its privacy-audit specs (the production fit on a tight pair, broken variants).
"""
